package pipeline

import (
	"context"
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/trace"
)

// TestReplay_numbered: the replayed events reach the summaries with their
// blocks numbered (fanout.numberAhead): every alloc has a number, a free
// the number of its address's alloc; and the summaries, which keep their
// blocks by number (analysis.Options.Numbered), are those of a summarizer
// fed the same events by address.
func TestReplay_numbered(t *testing.T) {
	in, r := sampleAt(t, Settings{Conf: "expandable_segments:True"})
	var evs []trace.Event
	run, err := Replay(context.Background(), in, r, Options{Observe: func(ev *trace.Event) { evs = append(evs, *ev) }})
	if err != nil {
		t.Fatal(err)
	}
	live := map[uint64]int32{}
	allocs := 0
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case trace.KindAlloc:
			allocs++
			if ev.Ref <= 0 {
				t.Fatalf("event %d: alloc %#x without a number", ev.Seq, ev.Addr)
			}
			live[ev.Addr] = ev.Ref
		case trace.KindFreeRequested, trace.KindFreeCompleted:
			if want := live[ev.Addr]; ev.Ref != want {
				t.Fatalf("event %d: %s %#x numbered %d, its alloc %d", ev.Seq, ev.Kind, ev.Addr, ev.Ref, want)
			}
			if ev.Kind == trace.KindFreeCompleted {
				delete(live, ev.Addr)
			}
		}
		ev.Ref = 0
	}
	if allocs < 100 {
		t.Fatalf("%d allocs: the replay tests too little", allocs)
	}
	s := analysis.NewSummarizer(analysis.Options{MemoryLimit: r.Limit, Annotations: in.Meta.Annotations,
		Stacks: func(id trace.StackID) trace.Stack {
			if id < 0 || int(id) >= len(run.Stacks) {
				return nil
			}
			return run.Stacks[id]
		}})
	for i := range evs {
		s.Event(&evs[i])
	}
	if got, want := run.Summaries[0], s.Finalize(); !reflect.DeepEqual(got, want) {
		t.Errorf("the replay's Summary differs from one by address\n got %+v\nwant %+v", got, want)
	}
}
