package analysis_test

import (
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/analysis/analysistest"
	"github.com/tracer-dev/tracer/record/sample"
	"github.com/tracer-dev/tracer/trace"
)

// State adds up: each segment's live blocks sum to its allocated and
// pending bytes, and the segments to the levels.
func TestSummarizer_State(t *testing.T) {
	rd, err := sample.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	s := analysis.NewSummarizer(analysis.Options{})
	var checked int
	for i := 0; rd.Next(); i++ {
		s.Event(rd.Event())
		if i%97 != 0 {
			continue
		}
		st := s.State()
		if st.Event != int64(i) {
			t.Fatalf("State.Event %d after event %d", st.Event, i)
		}
		var reserved, allocated, active int64
		for _, g := range st.Segments {
			var alloc, pend int64
			for _, b := range g.Live {
				if b.Pending {
					pend += int64(b.Size)
				} else {
					alloc += int64(b.Size)
				}
			}
			if alloc != int64(g.Allocated) || pend != int64(g.PendingFree) || len(g.Live) != int(g.Blocks) {
				t.Fatalf("event %d: segment %#x: blocks sum to %d allocated, %d pending, %d blocks; layout says %d, %d, %d",
					i, g.Addr, alloc, pend, len(g.Live), g.Allocated, g.PendingFree, g.Blocks)
			}
			reserved += int64(g.Size)
			allocated += alloc
			active += alloc + pend
		}
		if len(st.Outside) != 0 || reserved != st.Levels.Reserved || allocated != st.Levels.Allocated || active != st.Levels.Active {
			t.Fatalf("event %d: segments hold %d reserved, %d allocated, %d active (%d outside); levels %+v",
				i, reserved, allocated, active, len(st.Outside), st.Levels)
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("checked %d states", checked)
	}
}

// A Summarizer resumed from a State goes on exactly as the one that made
// it: the same States and Levels after every later event.
func TestResume(t *testing.T) {
	var evs []trace.Event
	analysistest.Training(3, 40_000, func(ev *trace.Event) { evs = append(evs, *ev) })
	for _, at := range []int{0, 1234, 20_000, len(evs) - 2} {
		a := analysis.NewSummarizer(analysis.Options{})
		for i := 0; i <= at; i++ {
			a.Event(&evs[i])
		}
		b := analysis.Resume(analysis.Options{}, a.State())
		for i := at + 1; i < len(evs); i++ {
			a.Event(&evs[i])
			b.Event(&evs[i])
			if a.Levels() != b.Levels() {
				t.Fatalf("resumed at %d: event %d: levels %+v, want %+v", at, i, b.Levels(), a.Levels())
			}
			if i%501 == 0 || i == len(evs)-1 {
				if sa, sb := a.State(), b.State(); !reflect.DeepEqual(sa, sb) {
					t.Fatalf("resumed at %d: event %d: states differ", at, i)
				}
			}
		}
	}
}
