package replay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/trace"
)

// TestSnapshotWrappedExpandable makes wrapped histories of the real
// expandable-segment snapshots by dropping the first part of their traces,
// as a smaller max_entries would have, and replays each from the start
// state tracer import reconstructs (a segment_map per mapped range, then
// the live blocks) under the recorded settings: no event differs from the
// recording, and the replay ends in the dumped layout, block for block.
// Restore refused the reconstructed segment_map before. Cut at 100%, the
// history is empty, as in a dump of the state alone.
func TestSnapshotWrappedExpandable(t *testing.T) {
	for _, name := range []string{"mlp_train__expandable", "multistream__expandable__seed1", "oom__expandable__seed1",
		"churn__expfrac__seed4", "churn__expsplit__seed3"} {
		s := loadSnapshot(t, name)
		snap, err := torchsnap.ReadFile(fmt.Sprintf("%s/%s.pickle", snapDir, name))
		if err != nil {
			t.Fatal(err)
		}
		conf, err := allocator.ParseConf(s.conf)
		if err != nil {
			t.Fatal(err)
		}
		dev := snap.Devices[0]
		all := dev.Events
		for _, pct := range []int{5, 20, 35, 50, 65, 80, 95, 100} { // 100: a state-only dump
			t.Run(fmt.Sprintf("%s/%d%%", name, pct), func(t *testing.T) {
				dev.Events = all[len(all)*pct/100:]
				start, err := dev.Reconstruct(conf.RoundSize)
				if err != nil {
					t.Fatal(err)
				}
				maps := 0
				for _, e := range start {
					if e.Kind == trace.KindSegmentMap {
						maps++
					}
				}
				if maps == 0 {
					t.Fatalf("no mapped range at %d%%: the cut restores no expandable segment", pct)
				}
				events := append(append([]trace.Event(nil), start...), dev.Events...)
				for i := range events {
					events[i].Seq = int64(i)
				}
				d, got := replaySnapshot(t, s, events)
				for _, m := range d.Mismatches {
					t.Errorf("mismatch at event %d: %s", m.Seq, m.What)
				}
				compareSegments(t, freeRequestedUnknown(s.segments), freeRequestedUnknown(d.Allocator.Segments()))
				compareStats(t, s, d.Stats.Map(), []string{"allocated_bytes.all.current", "reserved_bytes.all.current", "segment.all.current"})
				checkStartReported(t, start, got)
			})
		}
		dev.Events = all
	}
}

// freeRequestedUnknown returns segs with the requested size of free blocks
// cleared: a snapshot reports the one of the block's last allocation, which
// for a block free since before the history began no replay can know.
func freeRequestedUnknown(segs []allocator.SegmentInfo) []allocator.SegmentInfo {
	out := make([]allocator.SegmentInfo, len(segs))
	for i, s := range segs {
		s.Blocks = slices.Clone(s.Blocks)
		for j := range s.Blocks {
			if s.Blocks[j].State == allocator.Inactive {
				s.Blocks[j].Requested = 0
			}
		}
		out[i] = s
	}
	return out
}

// TestRestoreGatherScales restores 100,000 reconstructed segments, each
// filled by a live block (free blocks would time the free sets instead),
// given in descending address order: gathering the blocks
// examines O(log n) segments each (a binary search of the segments sorted
// once), where it scanned every segment for every block.
func TestRestoreGatherScales(t *testing.T) {
	const n = 100000
	var events []trace.Event
	for i := n - 1; i >= 0; i-- {
		events = append(events, trace.Event{Kind: trace.KindSegmentAlloc, Addr: 1<<40 + uint64(i)*(4<<20), Size: 2 << 20,
			Stack: trace.NoStack, Flags: trace.FlagReconstructed})
	}
	for i := 0; i < n; i++ {
		events = append(events, trace.Event{Kind: trace.KindAlloc, Addr: 1<<40 + uint64(i)*(4<<20), Size: 2 << 20, BlockSize: 2 << 20,
			Stack: trace.NoStack, Flags: trace.FlagReconstructed})
	}
	for i := range events {
		events[i].Seq = int64(i)
	}
	examined := 0
	restoreExamined = func() { examined++ }
	defer func() { restoreExamined = nil }()
	res, err := Run(context.Background(), NewSliceSource(events), Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 40}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Devices[0].Allocator.Stats()
	if st.Segment[0].Current != n || st.Allocation[0].Current != n {
		t.Fatalf("restored %d segments and %d blocks, want %d of each", st.Segment[0].Current, st.Allocation[0].Current, n)
	}
	// ⌈log2(n+1)⌉ = 17 probes a block.
	if limit := n * 17; examined > limit {
		t.Errorf("gathering %d blocks examined %d segments, more than %d", n, examined, limit)
	}
	t.Logf("%d segments examined for %d blocks", examined, n)
}

// TestExpandablePools: the pool of a reconstructed mapped range comes from
// its live blocks, else from its page tiling, else from the nearest decided
// range of its stream within one reservation, else it is large.
func TestExpandablePools(t *testing.T) {
	const mib = 1 << 20
	conf := allocator.DefaultConf()
	base := uint64(1) << 40
	blk := func(size int64) []allocator.BlockInfo {
		return []allocator.BlockInfo{{Size: size}}
	}
	segs := []allocator.SegmentInfo{
		{Addr: base, Size: 20 * mib, Blocks: blk(2 * mib)},                     // large block
		{Addr: base + 100*mib, Size: 20 * mib},                                 // near the large range
		{Addr: base + 1<<36, Size: 4 * mib, Blocks: blk(512)},                  // small block
		{Addr: base + 1<<36 + 40*mib, Size: 20 * mib},                          // near the small range
		{Addr: base + 1<<37, Size: 6 * mib},                                    // not whole 20 MiB pages
		{Addr: base + 1<<38, Size: 40 * mib, Stream: 7},                        // alone on its stream
		{Addr: base + 1<<36 + 60*mib, Size: 20 * mib, Stream: 7},               // near the small range, other stream
		{Addr: base + 1<<39, Size: 2 * mib, Blocks: blk(2 * mib), Small: true}, // not expandable: kept
	}
	for i := range segs[:7] {
		segs[i].Expandable = true
	}
	expandablePools(segs, conf, 80<<30)
	want := []bool{false, false, true, true, true, false, false, true}
	for i, s := range segs {
		if s.Small != want[i] {
			t.Errorf("range %d (%#x+%d): small %v, want %v", i, s.Addr, s.Size, s.Small, want[i])
		}
	}
}

// TestRestoreLogCopiesOnce gathers 100,000 reconstructed segments and as
// many live blocks with and without an observer: the events kept for the
// observer cost their own size in allocated bytes, about once (a slice
// grown by append copied each about four times and allocated 4-5×).
func TestRestoreLogCopiesOnce(t *testing.T) {
	const n = 100000
	var events []trace.Event
	for i := range n {
		events = append(events, trace.Event{Kind: trace.KindSegmentAlloc, Addr: 1<<40 + uint64(i)*(4<<20), Size: 2 << 20,
			Stack: trace.NoStack, Flags: trace.FlagReconstructed})
	}
	for i := range n {
		events = append(events, trace.Event{Kind: trace.KindAlloc, Addr: 1<<40 + uint64(i)*(4<<20), Size: 2 << 20, BlockSize: 2 << 20,
			Stack: trace.NoStack, Flags: trace.FlagReconstructed})
	}
	for i := range events {
		events[i].Seq = int64(i)
	}
	allocated := func(obs Observer) uint64 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		if _, err := Run(context.Background(), NewSliceSource(events), Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 40}, obs); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	without := allocated(nil)
	seen := 0
	with := allocated(ObserverFunc(func(*trace.Event) { seen++ }))
	if seen != 2*n {
		t.Fatalf("the observer saw %d events, want %d", seen, 2*n)
	}
	own := uint64(len(events)) * uint64(unsafe.Sizeof(trace.Event{}))
	if extra := with - without; extra > own+own/4 {
		t.Errorf("keeping %d events (%d bytes) for the observer allocated %d bytes more", len(events), own, extra)
	}
	t.Logf("%d bytes allocated without an observer, %d with; the events are %d bytes", without, with, own)
}

// restoreEvents returns n reconstructed 20 MiB segments of blocks 1 MiB
// blocks each, a free MiB after each block, then the blocks in address
// order.
func restoreEvents(n, blocks int) []trace.Event {
	const mib = 1 << 20
	var events []trace.Event
	for i := range n {
		events = append(events, trace.Event{Kind: trace.KindSegmentAlloc, Addr: 1<<40 + uint64(i)*(32*mib), Size: 20 * mib,
			Stack: trace.NoStack, Flags: trace.FlagReconstructed})
	}
	for i := range n {
		for j := range blocks {
			events = append(events, trace.Event{Kind: trace.KindAlloc, Addr: 1<<40 + uint64(i)*(32*mib) + uint64(j)*(2*mib),
				Size: mib, BlockSize: mib, Stack: trace.NoStack, Flags: trace.FlagReconstructed})
		}
	}
	for i := range events {
		events[i].Seq = int64(i)
	}
	return events
}

// TestRestoreMemoryPerBlock replays the restore of 20,000 and 40,000
// segments of 8 live blocks each and counts the bytes allocated a block:
// the same at both sizes, and at most 400 (the replay's table of live
// blocks, the allocator's blocks, the gathered block once). Each segment's
// blocks grown by append, sorted in a copy, and the allocator's arena
// grown by doubling took 677-684.
func TestRestoreMemoryPerBlock(t *testing.T) {
	const perSeg = 8
	var per [2]float64
	for k, n := range []int{20000, 40000} {
		events := restoreEvents(n, perSeg)
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		res, err := Run(context.Background(), NewSliceSource(events), Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 44}, nil)
		runtime.ReadMemStats(&m1)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Devices[0].Allocator.Stats().Allocation[0].Current; got != int64(n*perSeg) {
			t.Fatalf("restored %d blocks, want %d", got, n*perSeg)
		}
		per[k] = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n*perSeg)
		t.Logf("%d blocks: %.0f bytes allocated a block", n*perSeg, per[k])
	}
	for _, b := range per {
		if b > 400 {
			t.Errorf("restoring allocated %.0f bytes a block, more than 400", b)
		}
	}
}

// TestRestoreBlocksAssign gives each segment its blocks, sorted, whether
// they came in address order or not, in one chunk or across chunks.
func TestRestoreBlocksAssign(t *testing.T) {
	for _, shuffled := range []bool{false, true} {
		// Segment i at i<<32 holds sizes[i] blocks; the third holds none.
		sizes := []int{3, blockChunk - 2, 0, 5, 3 * blockChunk, 1}
		var segs []allocator.SegmentInfo
		var all []allocator.BlockInfo
		for i, k := range sizes {
			segs = append(segs, allocator.SegmentInfo{Addr: uint64(i) << 32, Size: 1 << 32})
			for j := range k {
				all = append(all, allocator.BlockInfo{Addr: uint64(i)<<32 + uint64(j)*512, Size: 512, Requested: int64(j)})
			}
		}
		in := slices.Clone(all)
		if shuffled {
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		}
		var l restoreBlocks
		for _, b := range in {
			l.add(b)
		}
		l.assign(segs)
		if l.n != 0 || l.chunks != nil {
			t.Errorf("shuffled %v: assign kept %d blocks", shuffled, l.n)
		}
		at := 0
		for i, s := range segs {
			want := all[at : at+sizes[i]]
			at += sizes[i]
			if !slices.Equal(s.Blocks, want) || cap(s.Blocks) != len(s.Blocks) {
				t.Errorf("shuffled %v: segment %d got %d blocks (capacity %d), want %d in address order", shuffled, i, len(s.Blocks), cap(s.Blocks), len(want))
			}
		}
	}
}
