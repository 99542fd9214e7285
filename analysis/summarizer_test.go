package analysis

import (
	"math"
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

const (
	KiB = 1 << 10
	MiB = 1 << 20
)

// Builders of hand-made events; run numbers Seq and, when t > 0, TimeUs.
func alloc(addr uint64, req, block int64, stack trace.StackID) trace.Event {
	return trace.Event{Kind: trace.KindAlloc, Addr: addr, Size: req, BlockSize: block, Stack: stack}
}
func freeReq(addr uint64) trace.Event {
	return trace.Event{Kind: trace.KindFreeRequested, Addr: addr}
}
func freeDone(addr uint64) trace.Event {
	return trace.Event{Kind: trace.KindFreeCompleted, Addr: addr}
}
func segAlloc(addr uint64, size int64) trace.Event {
	return trace.Event{Kind: trace.KindSegmentAlloc, Addr: addr, Size: size, Stack: trace.NoStack}
}
func segFree(addr uint64, size int64) trace.Event {
	return trace.Event{Kind: trace.KindSegmentFree, Addr: addr, Size: size, Stack: trace.NoStack}
}
func segMap(addr uint64, size int64) trace.Event {
	return trace.Event{Kind: trace.KindSegmentMap, Addr: addr, Size: size, Stack: trace.NoStack}
}
func segUnmap(addr uint64, size int64) trace.Event {
	return trace.Event{Kind: trace.KindSegmentUnmap, Addr: addr, Size: size, Stack: trace.NoStack}
}
func oom(size int64, deviceFree uint64) trace.Event {
	return trace.Event{Kind: trace.KindOOM, Addr: deviceFree, Size: size, Stack: 9}
}

// run feeds evs (Seq numbered; TimeUs = 1000 + 10·i when timed) and returns the Summary.
func run(t *testing.T, opt Options, timed bool, evs ...trace.Event) *Summary {
	t.Helper()
	s := NewSummarizer(opt)
	for i := range evs {
		ev := evs[i]
		ev.Seq = int64(i)
		if timed {
			ev.TimeUs = 1000 + 10*int64(i)
		}
		if ev.Kind == trace.KindFreeRequested || ev.Kind == trace.KindFreeCompleted {
			ev.BlockSize = 1 // frees use the block size remembered from the alloc
		}
		s.Event(&ev)
	}
	return s.Finalize()
}

func wantStats(t *testing.T, sum *Summary, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got, ok := sum.Stats[k]; !ok || got != v {
			t.Errorf("Stats[%q] = %d, want %d", k, got, v)
		}
	}
}

// Two segments, a split, a free and a peak; every value below is derived
// by hand from the definitions in doc.go.
func TestSummarizer_twoSegments(t *testing.T) {
	sum := run(t, Options{}, false,
		segAlloc(0x100000, 2*MiB),             // 0: small-pool segment
		alloc(0x100000, 1000, 1024, 1),        // 1: split: 1024 used
		alloc(0x100400, 500, 512, 2),          // 2: split again
		segAlloc(0x1000000, 20*MiB),           // 3: reserved peak 22 MiB
		alloc(0x1000000, 3*MiB-100, 3*MiB, 3), // 4: allocated peak
		freeReq(0x100000),                     // 5
		freeDone(0x100000),                    // 6
	)
	peakAlloc := int64(3*MiB + 1024 + 512)
	wantStats(t, sum, map[string]int64{
		"allocated_bytes.all.current": 3*MiB + 512,
		"allocated_bytes.all.peak":    peakAlloc,
		"reserved_bytes.all.current":  22 * MiB,
		"reserved_bytes.all.peak":     22 * MiB,
		"active_bytes.all.peak":       peakAlloc,
		"requested_bytes.all.current": 3*MiB - 100 + 500,
		"requested_bytes.all.peak":    3*MiB - 100 + 500 + 1000,
		"segment.all.current":         2,
		"segment.all.peak":            2,
		"allocation.all.allocated":    3,
		"allocation.all.freed":        1,
		"allocation.all.current":      2,
		"num_device_alloc":            2,
		"num_device_free":             0,
		"num_ooms":                    0,
		// seg 1 holds the 512 B block; seg 2 the 3 MiB one.
		"inactive_split_bytes.all.current": (2*MiB - 512) + (17 * MiB),
		"inactive_split_bytes.all.peak":    (2*MiB - 512) + (17 * MiB),
	})
	if p := sum.Peaks.Allocated; p.Bytes != Bytes(peakAlloc) || p.Event != 4 {
		t.Errorf("allocated peak = %+v, want %d at event 4", p, peakAlloc)
	}
	if p := sum.Peaks.Reserved; p.Bytes != 22*MiB || p.Event != 3 {
		t.Errorf("reserved peak = %+v, want 22 MiB at event 3", p)
	}
	f := sum.Fragmentation
	if want := Bytes(22*MiB - peakAlloc); f.ExternalAtReservedPeak != want {
		t.Errorf("ExternalAtReservedPeak = %d, want %d", f.ExternalAtReservedPeak, want)
	}
	if want := 1 - float64(peakAlloc)/(22*MiB); math.Abs(f.GMLake-want) > 1e-12 {
		t.Errorf("GMLake = %g, want %g", f.GMLake, want)
	}
	if want := Bytes(24 + 12 + 100); f.InternalAtPeak != want {
		t.Errorf("InternalAtPeak = %d, want %d", f.InternalAtPeak, want)
	}
	if f.ExternalMax.Bytes != 22*MiB-1536 || f.ExternalMax.Event != 3 {
		t.Errorf("ExternalMax = %+v, want 22 MiB - 1536 at event 3 (before the alloc)", f.ExternalMax)
	}
	wantSegs := []SegmentLayout{
		{Addr: 0x100000, Size: 2 * MiB, Blocks: 2, Allocated: 1536, SplitFree: 2*MiB - 1536},
		{Addr: 0x1000000, Size: 20 * MiB, Blocks: 1, Allocated: 3 * MiB, SplitFree: 17 * MiB},
	}
	if !reflect.DeepEqual(sum.Segments, wantSegs) || sum.SegmentsAt.Event != 4 {
		t.Errorf("Segments at event %d = %+v, want at 4: %+v", sum.SegmentsAt.Event, sum.Segments, wantSegs)
	}
	wantSites := []Site{
		{Stack: 3, BlockBytes: 3 * MiB, RequestedBytes: 3*MiB - 100, Count: 1},
		{Stack: 1, BlockBytes: 1024, RequestedBytes: 1000, Count: 1},
		{Stack: 2, BlockBytes: 512, RequestedBytes: 500, Count: 1},
	}
	if !reflect.DeepEqual(sum.Sites, wantSites) {
		t.Errorf("Sites = %+v, want %+v", sum.Sites, wantSites)
	}
	// The 3 MiB alloc grew the pool; before it, the largest hole was the
	// tail of segment 1.
	if g := sum.Grow; g == nil || g.BlockSize != 3*MiB || g.LargestFree != 2*MiB-1536 || g.NewBytes != 20*MiB {
		t.Errorf("Grow = %+v, want 3 MiB block, largest free %d, 20 MiB new", g, 2*MiB-1536)
	}
	if sum.Approximate || sum.Unmatched != 0 {
		t.Errorf("Approximate, Unmatched = %v, %d; want false, 0", sum.Approximate, sum.Unmatched)
	}
}

// A cross-stream free keeps the block active (and its requested bytes)
// until free_completed, while allocated drops at free_requested.
func TestSummarizer_crossStreamPendingFree(t *testing.T) {
	sum := run(t, Options{}, false,
		segAlloc(0x200000, 2*MiB),
		alloc(0x200000, 1*MiB, 1*MiB, 1), // 1
		freeReq(0x200000),                // 2: pending
		alloc(0x300000, 512*KiB, 512*KiB, 2),
		freeDone(0x200000), // 4
		freeReq(0x300000),
		freeDone(0x300000),
	)
	wantStats(t, sum, map[string]int64{
		"allocated_bytes.all.peak":    1 * MiB,
		"active_bytes.all.peak":       1*MiB + 512*KiB,
		"requested_bytes.all.peak":    1*MiB + 512*KiB,
		"active_bytes.all.current":    0,
		"allocated_bytes.all.current": 0,
		"allocation.all.allocated":    2,
	})
	if p := sum.Peaks.Active; p.Event != 3 {
		t.Errorf("active peak at event %d, want 3", p.Event)
	}
	// At event 3, allocated = 512 KiB but active = 1.5 MiB: the plateau's
	// most allocated is 1 MiB (event 1), so 1 MiB of reserve was unused.
	if f := sum.Fragmentation; f.ExternalAtReservedPeak != 1*MiB {
		t.Errorf("ExternalAtReservedPeak = %d, want 1 MiB", f.ExternalAtReservedPeak)
	}
	// At event 3 segment 1 holds one pending and one allocated block.
	if want := 1 * MiB; sum.SegmentsAt.Event != 1 || sum.Segments[0].Allocated != Bytes(want) {
		t.Errorf("Segments at %d: %+v, want layout at event 1 with 1 MiB allocated", sum.SegmentsAt.Event, sum.Segments)
	}
}

// Expandable segments: maps grow one range, an unmap shrinks it; segment
// counts do not move, device alloc/free counts do, and PyTorch's inactive
// split stat ignores expandable memory.
func TestSummarizer_expandable(t *testing.T) {
	const base = 0x40000000
	sum := run(t, Options{}, false,
		segMap(base, 2*MiB),                  // 0
		alloc(base, 2*MiB, 2*MiB, 1),         // 1: grow
		segMap(base+2*MiB, 2*MiB),            // 2: joins the range
		alloc(base+2*MiB, 1*MiB+1, 2*MiB, 2), // 3: grow, nothing was free
		freeReq(base), freeDone(base),        // 4, 5
		segUnmap(base, 2*MiB),                     // 6
		alloc(base+2*MiB+2*MiB, 1, 512, 3),        // 7: outside any segment: no layout effect
		freeReq(base+2*MiB), freeDone(base+2*MiB), // 8, 9
		segUnmap(base+2*MiB, 2*MiB), // 10
	)
	wantStats(t, sum, map[string]int64{
		"reserved_bytes.all.peak":          4 * MiB,
		"reserved_bytes.all.current":       0,
		"segment.all.current":              0,
		"segment.all.peak":                 0,
		"num_device_alloc":                 2,
		"num_device_free":                  2,
		"inactive_split_bytes.all.current": 0,
		"inactive_split_bytes.all.peak":    0,
		"allocated_bytes.all.current":      512,
	})
	want := []SegmentLayout{{Addr: base, Size: 4 * MiB, Expandable: true, Blocks: 2, Allocated: 4 * MiB}}
	if !reflect.DeepEqual(sum.Segments, want) {
		t.Errorf("Segments = %+v, want %+v", sum.Segments, want)
	}
	// Both grows are 2 MiB blocks; the first is kept. The new page counts
	// as occupied, so nothing was free before it.
	if g := sum.Grow; g == nil || g.Event != 1 || g.LargestFree != 0 || g.NewBytes != 2*MiB {
		t.Errorf("Grow = %+v, want event 1, largest free 0, 2 MiB new", g)
	}
	// The InactiveSplit series, unlike PyTorch's stat, counts expandable
	// ranges: the second page is free beside a live block at event 2.
	if f := sum.Fragmentation; f.InactiveSplitMax.Bytes != 2*MiB || f.InactiveSplitMax.Event != 2 || f.ExternalAtReservedPeak != 0 {
		t.Errorf("fragmentation = %+v, want 2 MiB split at event 2, no external bytes at the reserved peak", f)
	}
}

// An unmap in the middle of a mapped range splits it; the block counters
// follow the blocks.
func TestSummarizer_unmapSplitsRange(t *testing.T) {
	const base = 0x40000000
	s := NewSummarizer(Options{})
	for i, ev := range []trace.Event{
		segMap(base, 6*MiB),
		alloc(base, 1, 2*MiB, 1),
		alloc(base+4*MiB, 1, 2*MiB, 2),
		segUnmap(base+2*MiB, 2*MiB),
	} {
		ev.Seq = int64(i)
		s.Event(&ev)
	}
	if n := s.segs.tree.Len(); n != 2 {
		t.Fatalf("%d ranges, want 2", n)
	}
	s.segs.tree.Each(func(_ int64, g *segment) {
		if g.blocks != 1 || g.allocated != 2*MiB || g.size != 2*MiB {
			t.Errorf("range %#x: %+v, want one 2 MiB block filling 2 MiB", g.addr, *g)
		}
	})
}

func TestSummarizer_oom(t *testing.T) {
	sum := run(t, Options{}, false,
		segAlloc(0x100000, 2*MiB),
		alloc(0x100000, 1, 512*KiB, 1),
		alloc(0x100000+512*KiB, 1, 512*KiB, 2),
		alloc(0x100000+1*MiB, 1, 512*KiB, 3),
		freeReq(0x100000+512*KiB), freeDone(0x100000+512*KiB),
		oom(1*MiB, 300*MiB), // 6
	)
	wantStats(t, sum, map[string]int64{"num_ooms": 1})
	want := []OOM{{Event: 6, Seq: 6, Request: 1 * MiB, Stack: 9, DeviceFree: 300 * MiB,
		Reserved: 2 * MiB, Allocated: 1 * MiB, CacheFree: 1 * MiB,
		LargestFree: 512 * KiB, LargestFreeStream: 512 * KiB}}
	for i := range sum.OOMs { // the verdict is oom_test.go's
		o := &sum.OOMs[i]
		o.Cause, o.CapacityBytes, o.LiveBytes, o.FreeBesideLiveBytes, o.LiveSites, o.AvoidedBy = "", 0, 0, 0, nil, nil
	}
	if !reflect.DeepEqual(sum.OOMs, want) {
		t.Errorf("OOMs = %+v\nwant %+v", sum.OOMs, want)
	}
}

// Without BlockSize (a PyTorch trace), block sizes are the request rounded
// up to 512 and the Summary says so.
func TestSummarizer_approximate(t *testing.T) {
	sum := run(t, Options{}, false, alloc(0x1000, 1, 0, 1), alloc(0x2000, 513, 0, 1))
	wantStats(t, sum, map[string]int64{"allocated_bytes.all.current": 512 + 1024})
	if !sum.Approximate {
		t.Error("Approximate = false, want true")
	}
}

// The sites live at the allocated peak are the peak's, though the peak
// creeps up and the state changes after it.
func TestSummarizer_sitesAtPeak(t *testing.T) {
	sum := run(t, Options{TopSites: 2}, false,
		alloc(0x1000, 1, 1024, 1),
		alloc(0x2000, 1, 1024, 2),
		freeReq(0x1000), freeDone(0x1000), // a first peak of 2 KiB ends
		alloc(0x3000, 1, 2048, 3),
		alloc(0x4000, 1, 512, 4), // new peak: 2, 3, 4 = 3.5 KiB
		freeReq(0x3000), freeDone(0x3000),
		alloc(0x5000, 1, 1024, 5), // 2.5 KiB: below the peak
	)
	want := []Site{
		{Stack: 3, BlockBytes: 2048, RequestedBytes: 1, Count: 1},
		{Stack: 2, BlockBytes: 1024, RequestedBytes: 1, Count: 1},
	}
	if !reflect.DeepEqual(sum.Sites, want) {
		t.Errorf("Sites = %+v, want %+v", sum.Sites, want)
	}
	if o := sum.Other; o.Stack != OtherSites || o.BlockBytes != 512 || o.Count != 1 {
		t.Errorf("Other = %+v, want stack 4's 512 B", o)
	}
}

// A reconstructed pending block is active but not allocated; its free has
// no lifetime. Timed lifetimes are exact below 64 µs.
func TestSummarizer_lifetimes(t *testing.T) {
	pend := alloc(0x9000, 100, 512, 7)
	pend.Flags = trace.FlagReconstructed | trace.FlagPending
	sum := run(t, Options{}, true,
		pend,                      // 0
		alloc(0x1000, 1, 512, 1),  // 1 @1010
		alloc(0x2000, 1, 1024, 1), // 2 @1020
		freeReq(0x1000),           // 3 @1030: 20 µs
		freeDone(0x9000),          // 4
		freeReq(0x2000),           // 5 @1050: 30 µs
		alloc(0x3000, 1, 512, 2),  // 6: live at end
		freeDone(0x1000), freeDone(0x2000),
	)
	wantStats(t, sum, map[string]int64{"allocated_bytes.all.peak": 1536, "active_bytes.all.peak": 2048})
	l := sum.Lifetimes
	if l.Unit != "us" || l.Count != 2 || l.P50 != 20 || l.P90 != 30 || l.Max != 30 || l.P99 != 30 {
		t.Errorf("Lifetimes = %+v, want 2 in µs, p50 20, p90 and p99 30, max 30", l)
	}
	if l.Buckets[1].Count != 2 || l.Buckets[1].Bytes != 1536 {
		t.Errorf("bucket [10,100) = %+v, want 2 blocks of 1536 B", l.Buckets[1])
	}
	if l.LiveAtEnd != 1 || l.LiveAtEndBytes != 512 {
		t.Errorf("LiveAtEnd = %d (%d B), want 1 (512 B)", l.LiveAtEnd, l.LiveAtEndBytes)
	}
	if sum.Timeline.X(0, 1000) != 0 || !sum.Timeline.HasTime {
		t.Errorf("timeline origin: HasTime %v T0 %d", sum.Timeline.HasTime, sum.Timeline.T0Us)
	}
}

// Frees of unknown blocks and segments are counted, not fatal.
func TestSummarizer_unmatched(t *testing.T) {
	sum := run(t, Options{}, false, freeReq(0x1000), freeDone(0x2000), segFree(0x3000, 2*MiB),
		alloc(0x4000, 1, 512, 1), freeDone(0x4000))
	if sum.Unmatched != 4 {
		t.Errorf("Unmatched = %d, want 4", sum.Unmatched)
	}
	wantStats(t, sum, map[string]int64{"allocated_bytes.all.current": 0, "active_bytes.all.current": 0})
}

// Events of other devices are skipped.
func TestSummarizer_device(t *testing.T) {
	ev := alloc(0x1000, 1, 512, 1)
	ev.Device = 1
	sum := run(t, Options{Device: 0}, false, ev)
	if sum.Events != 0 || sum.SkippedEvents != 1 {
		t.Errorf("Events, Skipped = %d, %d; want 0, 1", sum.Events, sum.SkippedEvents)
	}
}

// The layout copy pending at the reserved peak is taken before a
// segment_free removes a segment of that peak.
func TestSummarizer_layoutBeforeSegmentFree(t *testing.T) {
	sum := run(t, Options{}, false,
		segAlloc(0x100000, 2*MiB),
		segAlloc(0x400000, 2*MiB),
		alloc(0x100000, 1, 1*MiB, 1), // 2: the reserved plateau is fullest
		segFree(0x400000, 2*MiB),     // 3: first decrease
	)
	want := []SegmentLayout{
		{Addr: 0x100000, Size: 2 * MiB, Blocks: 1, Allocated: 1 * MiB, SplitFree: 1 * MiB},
		{Addr: 0x400000, Size: 2 * MiB, Free: 2 * MiB},
	}
	if !reflect.DeepEqual(sum.Segments, want) || sum.SegmentsAt.Event != 2 {
		t.Errorf("Segments at event %d = %+v\nwant at 2: %+v", sum.SegmentsAt.Event, sum.Segments, want)
	}
	wantStats(t, sum, map[string]int64{"segment.all.current": 1, "segment.all.peak": 2, "num_device_free": 1})
}

// Blocks live before the recording began (reconstructed, so without a
// stack) are a site of their own at the peak, apart from blocks allocated
// without a stack; one freed before the peak is in neither.
func TestSummarizer_sitesBeforeRecording(t *testing.T) {
	recon := func(ev trace.Event) trace.Event { ev.Flags |= trace.FlagReconstructed; return ev }
	sum := run(t, Options{TopSites: 5}, false,
		recon(segAlloc(0x10000, 20*MiB)),
		recon(alloc(0x10000, 4*MiB, 4*MiB, trace.NoStack)),
		recon(alloc(0x10000+4*MiB, 1*MiB, 1*MiB, trace.NoStack)),
		recon(alloc(0x10000+5*MiB, 2*MiB, 2*MiB, 7)), // a stack the snapshot still had
		freeReq(0x10000+4*MiB), freeDone(0x10000+4*MiB),
		alloc(0x10000+6*MiB, 3*MiB, 3*MiB, trace.NoStack),
		alloc(0x10000+9*MiB, 1*MiB, 1*MiB, 7),
	)
	want := []Site{
		{Stack: BeforeRecording, BlockBytes: 4 * MiB, RequestedBytes: 4 * MiB, Count: 1},
		{Stack: trace.NoStack, BlockBytes: 3 * MiB, RequestedBytes: 3 * MiB, Count: 1},
		{Stack: 7, BlockBytes: 3 * MiB, RequestedBytes: 3 * MiB, Count: 2},
	}
	if !reflect.DeepEqual(sum.Sites, want) {
		t.Errorf("Sites = %+v, want %+v", sum.Sites, want)
	}
	for _, x := range sum.Sites {
		got := x.Label()
		switch x.Stack {
		case BeforeRecording:
			if got != "(live before the recording began)" {
				t.Errorf("label of the blocks before the recording: %q", got)
			}
		case trace.NoStack:
			if got != "(no stack)" {
				t.Errorf("label of the blocks without a stack: %q", got)
			}
		}
	}
}
