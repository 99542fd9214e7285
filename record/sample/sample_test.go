package sample_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/record/sample"
	"github.com/tracer-dev/tracer/trace"
)

var update = flag.Bool("update", false, "rewrite mlp_train.arrows from the snapshot in testdata")

// The embedded sample must be what importing its snapshot gives today.
func TestSampleIsFresh(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mlp_train.arrows")
	snap := "../../testdata/snapshots/mlp_train__default.pickle"
	if _, err := record.ImportSnapshots(context.Background(), []string{snap}, record.ImportOptions{Out: out}); err != nil {
		t.Fatal(err)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("mlp_train.arrows", fresh, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := events(t, bytes.NewReader(fresh))
	rd, err := sample.Open()
	if err != nil {
		t.Fatal(err)
	}
	got := events(t, rd)
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("sample has %d events, a fresh import %d; run go test ./record/sample -update", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("event %d differs from a fresh import: %+v vs %+v; run go test ./record/sample -update", i, got[i], want[i])
		}
	}
}

func events(t *testing.T, src any) []trace.Event {
	t.Helper()
	var rd *trace.Reader
	switch s := src.(type) {
	case *trace.Reader:
		rd = s
	case *bytes.Reader:
		var err error
		if rd, err = trace.NewReader(s, "fresh"); err != nil {
			t.Fatal(err)
		}
	}
	defer rd.Close()
	var evs []trace.Event
	for rd.Next() {
		evs = append(evs, *rd.Event())
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}
