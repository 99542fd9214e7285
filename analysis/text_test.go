package analysis_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/analysis/analysistest"
	"github.com/tracer-dev/tracer/record/sample"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// fakeStacks names synthetic sites like a model's Python frames.
func fakeStacks(id trace.StackID) trace.Stack {
	return trace.Stack{
		{Name: fmt.Sprintf("layer%d_forward", id), File: "/src/model/transformer_blocks.py", Line: int32(100 + id)},
		{Name: "forward", File: "/src/model/model.py", Line: 42},
		{Name: "train_step", File: "/src/train.py", Line: 7},
	}
}

func syntheticSummary(n int) *analysis.Summary {
	s := analysis.NewSummarizer(analysis.Options{Stacks: fakeStacks, TopSites: 6, SiteFrames: 2})
	analysistest.Training(11, n, s.Event)
	return s.Finalize()
}

func TestWriteText(t *testing.T) {
	t.Run("synthetic", func(t *testing.T) { checkText(t, syntheticSummary(200_000), "testdata/text.golden") })
	t.Run("mlp_train", func(t *testing.T) { checkText(t, sampleSummary(t), "testdata/mlp_train.golden") })
}

// sampleSummary replays the built-in real trace under the default settings,
// its phases from its annotations.
func sampleSummary(t *testing.T) *analysis.Summary {
	rd, err := sample.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	s := analysis.NewSummarizer(analysis.Options{Stacks: rd.Stack, Annotations: rd.Meta().Annotations})
	if _, err := replay.Run(context.Background(), rd, replay.Options{Conf: allocator.DefaultConf(), Recorded: true}, s); err != nil {
		t.Fatal(err)
	}
	return s.Finalize()
}

func checkText(t *testing.T, sum *analysis.Summary, golden string) {
	var buf bytes.Buffer
	if err := analysis.WriteText(&buf, sum, 5); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(buf.String(), "\n") {
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("line %d has %d columns: %q", i+1, n, line)
		}
	}
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("WriteText differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {3321008, "3,321,008"}, {-1234567, "-1,234,567"}, {100000, "100,000"}} {
		if got := analysis.Count(c.n); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
