package torchsnap

import (
	"slices"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestSkipActions: a snapshot recorded with skip_actions (here, a real
// one with those actions dropped) reconstructs a start state that a replay
// can restore, every reconstructed block inside a reconstructed segment
// (before, frees of blocks whose allocs were skipped became blocks live at
// the start in segments allocated later, which the import's replay
// refused), and Validate says what is missing in one problem, first,
// without the problems that follow from it.
func TestSkipActions(t *testing.T) {
	for _, c := range []struct {
		file    string
		skip    []trace.Kind
		missing string
	}{
		{"mlp_train__default", []trace.Kind{trace.KindAlloc}, "no alloc entries"},
		{"mlp_train__default", []trace.Kind{trace.KindAlloc, trace.KindFreeRequested}, "no alloc or free_requested entries"},
		{"mlp_train__default", []trace.Kind{trace.KindFreeRequested}, "no free_requested entries"},
		{"mlp_train__default", []trace.Kind{trace.KindFreeCompleted}, "no free_completed entries"},
		{"multistream__default__seed1", []trace.Kind{trace.KindAlloc}, "no alloc entries"},
		{"mlp_train__expandable", []trace.Kind{trace.KindAlloc}, "no alloc entries"},
	} {
		t.Run(c.file+"/"+c.missing, func(t *testing.T) {
			s, err := ReadFile(snapDir + "/" + c.file + ".pickle")
			if err != nil {
				t.Fatal(err)
			}
			d := s.Devices[0]
			d.Events = slices.DeleteFunc(slices.Clone(d.Events), func(e trace.Event) bool { return slices.Contains(c.skip, e.Kind) })
			initial, err := d.Reconstruct(roundSize)
			if err != nil {
				t.Fatal(err)
			}
			var segs [][2]uint64
			for _, e := range initial {
				switch e.Kind {
				case trace.KindSegmentAlloc, trace.KindSegmentMap:
					segs = append(segs, [2]uint64{e.Addr, e.Addr + uint64(e.Size)})
				case trace.KindAlloc:
					if !slices.ContainsFunc(segs, func(s [2]uint64) bool { return s[0] <= e.Addr && e.Addr < s[1] }) {
						t.Fatalf("reconstructed block %#x lies in no reconstructed segment", e.Addr)
					}
				}
			}
			probs := d.Validate()
			if len(probs) == 0 || !strings.Contains(probs[0].String(), "the trace has no "+strings.TrimPrefix(c.missing, "no ")) ||
				!strings.Contains(probs[0].String(), "skip_actions") {
				t.Fatalf("problems %v: want the first to say the trace has %s", probs, c.missing)
			}
			for _, p := range probs[1:] {
				if strings.Contains(p.Kind, "free of an address that is not allocated") || strings.Contains(p.Kind, "without free_requested") {
					t.Errorf("problem %v follows from the missing entries", p)
				}
			}
		})
	}
	// A wrapped history's tail of frees (a teardown) is not a skipped alloc.
	s, err := ReadFile(snapDir + "/empty_cache__default.pickle")
	if err != nil {
		t.Fatal(err)
	}
	d := s.Devices[0]
	d.Events = d.Events[len(d.Events)*9/10:]
	if _, err := d.Reconstruct(roundSize); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Validate() {
		if strings.Contains(p.Kind, "skip_actions") {
			t.Errorf("the tail of a wrapped history: %v", p)
		}
	}
}
