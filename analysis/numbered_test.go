package analysis

import (
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/analysis/analysistest"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// TestNumbered: a Summarizer fed events whose blocks are numbered
// (Options.Numbered, the numbers of replay.BlockNumbers or of its parts)
// looks up no address in a hash table, not once, where one fed the same
// events by address does more than once an event; and the two summaries
// are equal, full or FragmentationOnly, as are their States, on a
// synthetic stream with the corrupt cases added (trainingCorrupt) and on
// the real sample replayed under expandable_segments (unmaps).
func TestNumbered(t *testing.T) {
	var sample []trace.Event
	if err := analysistest.Sample("expandable_segments:True", func(ev *trace.Event) { sample = append(sample, *ev) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		evs  []trace.Event
	}{
		{"training", trainingCorrupt()},
		{"sample-expandable", sample},
	} {
		evs := c.evs
		for i := range evs {
			evs[i].Seq = int64(i)
		}
		for _, parts := range []int{1, 3} {
			numbered := append([]trace.Event(nil), evs...)
			nums := replay.NewPartNumbers(parts, false)
			nums.Start(numbered)
			nums.Done()
			nums.Close()
			for _, only := range []bool{false, true} {
				opt := Options{TimelineBuckets: 64, FragmentationOnly: only}
				hashed := NewSummarizer(opt)
				opt.Numbered = true
				byNumber := NewSummarizer(opt)
				hashed.Events(evs)
				byNumber.Events(numbered)
				if got, least := hashed.live.lookups, 3*len(evs)/2; got < least {
					t.Fatalf("%s: the hashed table did %d lookups for %d events: the stream tests too little", c.name, got, len(evs))
				}
				if n := byNumber.live.lookups; n != 0 {
					t.Errorf("%s, %d parts, fragmentation only %v: %d lookups by address for %d numbered events, want none",
						c.name, parts, only, n, len(evs))
				}
				if want, got := hashed.State(), byNumber.State(); !reflect.DeepEqual(got, want) {
					t.Errorf("%s, %d parts, fragmentation only %v: the States differ", c.name, parts, only)
				}
				want, got := hashed.Finalize(), byNumber.Finalize()
				if want.Unmatched == 0 && c.name == "training" {
					t.Fatalf("%s: no unmatched event: the corrupt cases are missing", c.name)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s, %d parts, fragmentation only %v: the Summaries differ\n got %+v\nwant %+v", c.name, parts, only, got, want)
				}
			}
		}
	}
}

// trainingCorrupt is a synthetic training stream with a corrupt trace's
// cases added: a second alloc at a live address, frees of addresses never
// allocated, a free_completed without its free_requested, a segment freed
// under live blocks.
func trainingCorrupt() []trace.Event {
	var evs []trace.Event
	emit := func(ev *trace.Event) { evs = append(evs, *ev) }
	n := 0
	analysistest.Training(5, 100_000, func(ev *trace.Event) {
		n++
		emit(ev)
		switch {
		case n%997 == 0 && ev.Kind == trace.KindAlloc:
			again := *ev // the frees were lost: a second alloc here
			emit(&again)
		case n%1009 == 0:
			stray := trace.Event{Kind: trace.KindFreeRequested, Addr: 0x10000 + uint64(n)*512, Size: 512, Stack: trace.NoStack}
			emit(&stray)
			stray.Kind = trace.KindFreeCompleted
			emit(&stray)
		case n%1013 == 0 && ev.Kind == trace.KindAlloc:
			done := *ev // free_completed, no free_requested
			done.Kind = trace.KindFreeCompleted
			emit(&done)
		}
	})
	// A segment freed under its live blocks, then one more alloc there.
	seg := uint64(1) << 44
	for _, ev := range []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: seg, Size: 4 << 20},
		{Kind: trace.KindAlloc, Addr: seg, Size: 1000, BlockSize: 1024},
		{Kind: trace.KindAlloc, Addr: seg + 1024, Size: 512, BlockSize: 512},
		{Kind: trace.KindSegmentFree, Addr: seg, Size: 4 << 20},
		{Kind: trace.KindFreeRequested, Addr: seg, Size: 1000, BlockSize: 1024},
		{Kind: trace.KindAlloc, Addr: seg + 1024, Size: 512, BlockSize: 512},
	} {
		ev.Stack = trace.NoStack
		emit(&ev)
	}
	return evs
}
