package replay

import (
	"context"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// followTrace is a run that makes a segment for a 5 MiB request, then two
// 40 MiB segments, the second below the first (the driver's new chunks go
// down), frees both blocks and allocates 40 MiB again, which best fit
// takes from the lower segment: the second.
func followTrace() []trace.Event {
	const small, hi, lo, size = 0x7f2000000000, 0x7f1000000000, 0x7f0000000000, 40 << 20
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: small, Size: 20 << 20},
		{Kind: trace.KindAlloc, Addr: small, Size: 5 << 20},
		{Kind: trace.KindSegmentAlloc, Addr: hi, Size: size},
		{Kind: trace.KindAlloc, Addr: hi, Size: size},
		{Kind: trace.KindSegmentAlloc, Addr: lo, Size: size},
		{Kind: trace.KindAlloc, Addr: lo, Size: size},
		{Kind: trace.KindFreeRequested, Addr: hi, Size: size},
		{Kind: trace.KindFreeCompleted, Addr: hi, Size: size},
		{Kind: trace.KindFreeRequested, Addr: lo, Size: size},
		{Kind: trace.KindFreeCompleted, Addr: lo, Size: size},
		{Kind: trace.KindAlloc, Addr: lo, Size: size},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	return evs
}

// Under other settings, a replay whose cudaMalloc calls are still the
// recording's gives its segments the recorded addresses, so that a tie
// between equal free blocks goes the way it went in the recording; once
// the calls part (large_segment_size_mb makes the first segment 30 MiB),
// it invents ascending addresses, and the tie goes to the first segment.
func TestFollowRecordedAddresses(t *testing.T) {
	for _, c := range []struct {
		conf   string
		lowest bool // the last alloc took the segment made second
	}{
		{conf: "roundup_power2_divisions:4", lowest: true},
		{conf: "large_segment_size_mb:30", lowest: false},
	} {
		conf, err := allocator.ParseConf(c.conf)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), NewSliceSource(followTrace()), Options{Conf: conf}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var made []allocator.SegmentInfo // the 40 MiB segments
		for _, s := range res.Devices[0].Allocator.Segments() {
			if s.Size == 40<<20 {
				made = append(made, s)
			}
		}
		if len(made) != 2 {
			t.Fatalf("%s: %d segments of 40 MiB, want 2", c.conf, len(made))
		}
		// Segments come in address order; the one made second is the
		// lower with the recorded addresses, the higher when invented.
		took := -1
		for i, s := range made {
			if s.Blocks[0].State == allocator.ActiveAllocated {
				took = i
			}
		}
		followed := made[0].Addr == 0x7f0000000000
		if followed != c.lowest || took != 0 {
			t.Errorf("%s: segments at %#x and %#x, the block in the %d-th; want the recorded addresses %v, the block in the lower",
				c.conf, made[0].Addr, made[1].Addr, took, c.lowest)
		}
	}
}
