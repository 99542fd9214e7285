package analysis

import (
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestBlocksHint: a Summarizer told the most blocks live at once
// (Options.Blocks) puts them without a rehash of its table, and its Summary
// is the one of a Summarizer told nothing.
func TestBlocksHint(t *testing.T) {
	const n = 50_000
	var evs []trace.Event
	seg := int64(1) << 40
	evs = append(evs, trace.Event{Kind: trace.KindSegmentAlloc, Addr: uint64(seg), Size: n * 512, Stack: trace.NoStack})
	for i := range int64(n) {
		evs = append(evs, trace.Event{Kind: trace.KindAlloc, Addr: uint64(seg + i*512), Size: 512, BlockSize: 512, Stack: trace.NoStack})
	}
	for i := int64(0); i < n; i += 2 {
		a := uint64(seg + i*512)
		evs = append(evs, trace.Event{Kind: trace.KindFreeRequested, Addr: a, Size: 512, BlockSize: 512, Stack: trace.NoStack},
			trace.Event{Kind: trace.KindFreeCompleted, Addr: a, Size: 512, BlockSize: 512, Stack: trace.NoStack})
	}
	for i := range evs {
		evs[i].Seq = int64(i)
	}
	summarize := func(blocks int) (*Summary, int) {
		s := NewSummarizer(Options{Blocks: blocks, FragmentationOnly: true})
		size := len(s.live.slots)
		rehashes := 0
		for i := range evs {
			s.Event(&evs[i])
			if len(s.live.slots) != size {
				size = len(s.live.slots)
				rehashes++
			}
		}
		return s.Finalize(), rehashes
	}
	want, plain := summarize(0)
	got, hinted := summarize(n)
	if !reflect.DeepEqual(got, want) {
		t.Error("the hinted Summarizer's Summary differs from the plain one's")
	}
	if plain == 0 || hinted != 0 {
		t.Errorf("rehashes of the table: plain %d, hinted %d; want some, and none", plain, hinted)
	}
}
