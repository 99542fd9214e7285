package analysis_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/record/sample"
)

// realStats reads torch.cuda.memory_stats() saved at the end of a real run.
func realStats(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../testdata/snapshots/" + name + ".stats.json")
	if err != nil {
		t.Skip(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Differential test: the built-in real trace (mlp_train, default settings)
// replayed on the allocator model and summarised must give PyTorch's own
// end-of-run memory_stats(), exactly, for every key both know.
func TestSummarizer_realReplay(t *testing.T) {
	sum := sampleSummary(t)
	if sum.Approximate {
		t.Error("replayed events lack BlockSize")
	}
	want := realStats(t, "mlp_train__default")
	for k, v := range want {
		f, ok := v.(float64)
		if _, known := sum.Stats[k]; !ok || !known {
			continue
		}
		if got := sum.Stats[k]; got != int64(f) {
			t.Errorf("%s = %d, PyTorch says %d", k, got, int64(f))
		}
	}
	// The optimizer state is the largest named site; its caller is the
	// training script, deeper than the kept frames.
	for _, x := range sum.Sites {
		if x.Stack >= 0 && (len(x.Frames) == 0 || x.Caller.File == "") {
			t.Errorf("site %d has frames %v, caller %v", x.Stack, x.Frames, x.Caller)
		}
	}
}

// The recorded events alone (no BlockSize) give the same peaks up to
// rounding, and say they are approximate.
func TestSummarizer_realRecorded(t *testing.T) {
	rd, err := sample.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	s := analysis.NewSummarizer(analysis.Options{Stacks: rd.Stack})
	for rd.Next() {
		s.Event(rd.Event())
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	sum := s.Finalize()
	want := realStats(t, "mlp_train__default")
	for _, k := range []string{"reserved_bytes.all.peak", "segment.all.peak", "num_device_alloc", "allocation.all.allocated", "requested_bytes.all.peak"} {
		if got, w := sum.Stats[k], int64(want[k].(float64)); got != w {
			t.Errorf("%s = %d, PyTorch says %d", k, got, w)
		}
	}
	if got, w := sum.Stats["allocated_bytes.all.peak"], int64(want["allocated_bytes.all.peak"].(float64)); got > w || got < w-w/100 {
		t.Errorf("allocated peak %d, want within 1%% below %d", got, w)
	}
}
