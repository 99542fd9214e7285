package view

import (
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// The store returns the events in order: mapped from its file, or from
// the heap after falling back to it midway.
func TestEventStore(t *testing.T) {
	var want []event
	for i := range 10_000 {
		want = append(want, event{addr: uint64(i) << 9, size: int64(i), timeUs: int64(3 * i), stack: trace.StackID(i % 7), kind: trace.KindAlloc})
	}
	for _, fall := range []int{-1, 0, 5000, 9999} {
		s := newEventStore()
		if canMap && s.f == nil {
			t.Fatal("no file for the events")
		}
		for i, e := range want {
			if i == fall && s.f != nil {
				s.fallBack()
			}
			s.add(e)
		}
		owner := &Trace{}
		if got := s.events(owner); !slices.Equal(got, want) {
			t.Errorf("falling back at %d: %d events, differ from the %d added", fall, len(got), len(want))
		}
	}
	if got := newEventStore().events(&Trace{}); len(got) != 0 {
		t.Errorf("an empty store returns %d events", len(got))
	}
}
