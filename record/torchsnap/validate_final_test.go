package torchsnap

import (
	"bytes"
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/tracer-dev/tracer/trace"
)

// TestValidate_finalState: the blocks live after the trace are compared
// with the final state's, each list in address order, the later of two
// final blocks at one address counting: live but not in the final state,
// pending in one and not the other, and in the final state but not live.
func TestValidate_finalState(t *testing.T) {
	const base = 0x7f00_0000_0000
	a := func(i int) uint64 { return base + uint64(i)*512 }
	blk := func(i int, st BlockState) Block { return Block{Addr: a(i), Size: 512, RequestedSize: 512, State: st} }
	d := &Device{
		Segments: []Segment{{Addr: base, TotalSize: 2 << 20, Blocks: []Block{
			blk(0, ActiveAllocated),
			blk(1, ActivePendingFree), // live, not pending after the trace
			blk(2, Inactive),          // live after the trace
			blk(5, ActiveAllocated),   // not live after the trace
			blk(3, ActiveAllocated),
			blk(3, ActivePendingFree), // the later one counts: pending differs
			blk(4, ActivePendingFree),
			blk(4, ActiveAllocated), // the later one counts: agrees
			blk(6, ActiveAllocated), // not live after the trace
		}}},
	}
	for _, i := range []int{0, 1, 2, 3, 4} {
		d.Events = append(d.Events, trace.Event{Kind: trace.KindAlloc, Addr: a(i), Size: 512, Stack: trace.NoStack})
	}
	d.Events = append(d.Events, trace.Event{Kind: trace.KindAlloc, Addr: a(7), Size: 512, Stack: trace.NoStack}) // live, not in the final state
	for _, i := range []int{6, 5} {                                                                              // freed: not live after the trace
		for _, k := range []trace.Kind{trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted} {
			d.Events = append(d.Events, trace.Event{Kind: k, Addr: a(i), Size: 512, Stack: trace.NoStack})
		}
	}
	for i := range d.Events {
		d.Events[i].Seq = int64(i)
	}
	problems := func(parts ...int) string {
		got := ""
		ps := d.Validate()
		if len(parts) > 0 {
			ps = d.ValidateParts(0, parts[0], nil)
		}
		for _, p := range ps {
			got += fmt.Sprintf("%s: %d;", p.Kind, p.Count)
			for _, e := range p.Examples {
				if e.Event == -1 {
					got += fmt.Sprintf(" %d", (e.Addr-base)/512)
				}
			}
			got += "\n"
		}
		return got
	}
	want := "block pending state differs from the final state: 2; 1 3\n" +
		"block live after the trace but not in the final state: 2; 2 7\n" +
		"block in the final state but not live after the trace: 2; 5 6\n"
	want0 := want
	if got := problems(); got != want {
		t.Errorf("problems:\n%s\nwant:\n%s", got, want)
	}
	// The same blocks in address order, as dumped (the walk of the
	// segments without a sorted copy): the same problems.
	blocks := d.Segments[0].Blocks
	slices.SortStableFunc(blocks, func(a, b Block) int { return cmp.Compare(a.Addr, b.Addr) })
	if !liveInOrder(d) {
		t.Fatal("blocks sorted by address are not in order")
	}
	if got := problems(); got != want {
		t.Errorf("problems, the blocks in address order:\n%s\nwant:\n%s", got, want)
	}
	// A segment a block, checked in ranges of segments (finalParts),
	// some of them cut between two blocks at one address: the same
	// problems.
	defer func(m int) { finalRangeMin = m }(finalRangeMin)
	finalRangeMin = 1
	segs := d.Segments[:0:0]
	for _, b := range blocks {
		segs = append(segs, Segment{Addr: b.Addr, TotalSize: 512, Blocks: []Block{b}})
	}
	d.Segments = segs
	want = problems() // one pass: block 7's alloc is now outside every segment too
	if !strings.HasSuffix(want, "\n"+want0) {
		t.Fatalf("problems, a segment a block:\n%s\nwant them to end in:\n%s", want, want0)
	}
	for parts := 2; parts <= 9; parts++ {
		if got := problems(parts); got != want {
			t.Errorf("problems, %d parts, the final state in ranges:\n%s\nwant:\n%s", parts, got, want)
		}
	}
}

// TestValidate_segmentFreeLive: a segment_free while a block allocated in
// the segment is live is reported, at that event; one after the block's
// free is not, nor one of a segment at the same base allocated again and
// holding nothing (the count follows the base, whichever segment holds
// it), nor of another segment while the first holds a block. The blocks'
// records hold the segment's number (liveRec.seg), not its base.
func TestValidate_segmentFreeLive(t *testing.T) {
	const s1, s2 = 0x7f00_0000_0000, 0x7f00_0040_0000
	ev := func(k trace.Kind, addr uint64, size int64) trace.Event {
		return trace.Event{Kind: k, Addr: addr, Size: size, Stack: trace.NoStack}
	}
	d := &Device{Events: []trace.Event{
		ev(trace.KindSegmentAlloc, s1, 2<<20),
		ev(trace.KindSegmentAlloc, s2, 2<<20),
		ev(trace.KindAlloc, s1+512, 512),
		ev(trace.KindAlloc, s2, 512),
		ev(trace.KindFreeRequested, s2, 512),
		ev(trace.KindFreeCompleted, s2, 512),
		ev(trace.KindSegmentFree, s2, 2<<20), // empty: fine
		ev(trace.KindSegmentFree, s1, 2<<20), // event 7: s1+512 is live
		ev(trace.KindSegmentAlloc, s1, 2<<20),
		ev(trace.KindFreeRequested, s1+512, 512),
		ev(trace.KindFreeCompleted, s1+512, 512),
		ev(trace.KindSegmentFree, s1, 2<<20), // the block is gone: fine
	}}
	for i := range d.Events {
		d.Events[i].Seq = int64(i)
	}
	var got []string
	for _, p := range d.Validate() {
		for _, e := range p.Examples {
			got = append(got, fmt.Sprintf("%s at %d", p.Kind, e.Event))
		}
	}
	want := []string{"segment_free of a segment with live blocks at 7"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
	if n := unsafe.Sizeof(liveRec{}); n != 8 {
		t.Errorf("liveRec is %d bytes, want 8 (a 16-byte slot in the table of live blocks)", n)
	}
}

// TestValidateReserved: told how many more blocks are live at once than at
// the trace's start, Validate finds the same problems and makes its table
// of live blocks once instead of doubling it on the way (fewer
// allocations: a table for about a thousand blocks doubles five times or
// more from its first size).
func TestValidateReserved(t *testing.T) {
	var buf bytes.Buffer
	if err := writeSyntheticSnapshot(&buf, 20000); err != nil {
		t.Fatal(err)
	}
	s, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	d := s.Devices[0]
	if _, err := d.Reconstruct(roundSize); err != nil {
		t.Fatal(err)
	}
	var live, peak int64
	for _, e := range d.Events {
		switch e.Kind {
		case trace.KindAlloc:
			live++
			peak = max(peak, live)
		case trace.KindFreeCompleted:
			live--
		}
	}
	if peak < 500 {
		t.Fatalf("at most %d blocks live at once; want a snapshot with more", peak)
	}
	want := d.Validate()
	if got := d.ValidateReserved(peak); !reflect.DeepEqual(got, want) {
		t.Errorf("ValidateReserved(%d): %v, Validate: %v", peak, got, want)
	}
	grown := testing.AllocsPerRun(3, func() { d.Validate() })
	reserved := testing.AllocsPerRun(3, func() { d.ValidateReserved(peak) })
	if reserved > grown-4 {
		t.Errorf("allocations: %.0f reserved, %.0f grown; want at least 4 fewer", reserved, grown)
	}
	t.Logf("peak %d live: %.0f allocations reserved, %.0f grown", peak, reserved, grown)
}
