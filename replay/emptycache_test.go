package replay

import (
	"context"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// emptyCacheTrace is a run that frees a 30 MiB block and calls
// empty_cache(), which releases its segment, then allocates 30 MiB again;
// with rows, the call is an empty_cache row before the release.
func emptyCacheTrace(rows bool, pool trace.PoolID) []trace.Event {
	const seg, size = 0x7f0000000000, 30 << 20
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: seg, Size: size},
		{Kind: trace.KindAlloc, Addr: seg, Size: size},
		{Kind: trace.KindFreeRequested, Addr: seg, Size: size},
		{Kind: trace.KindFreeCompleted, Addr: seg, Size: size},
	}
	if rows {
		evs = append(evs, trace.Event{Kind: trace.KindEmptyCache, Size: size})
	}
	evs = append(evs,
		trace.Event{Kind: trace.KindSegmentFree, Addr: seg, Size: size},
		trace.Event{Kind: trace.KindSegmentAlloc, Addr: seg + size, Size: size, Pool: pool},
		trace.Event{Kind: trace.KindAlloc, Addr: seg + size, Size: size, Pool: pool})
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	return evs
}

// With empty_cache rows, a replay under any settings performs the calls
// the rows state, and takes the recorded releases as outcomes: here the
// release is followed at once by the next malloc, which the inference of a
// trace without rows attributes to that malloc under other settings (and
// so makes no call, and reuses the cached segment).
func TestEmptyCacheRows(t *testing.T) {
	for _, c := range []struct {
		rows, recorded   bool
		calls, devAllocs int64
	}{
		{rows: true, recorded: true, calls: 1, devAllocs: 2},
		{rows: true, recorded: false, calls: 1, devAllocs: 2},
		{rows: false, recorded: true, calls: 1, devAllocs: 2},  // the model knows the malloc would not release
		{rows: false, recorded: false, calls: 0, devAllocs: 1}, // the guess from the recording's shape
	} {
		conf := allocator.DefaultConf()
		res, err := Run(context.Background(), NewSliceSource(emptyCacheTrace(c.rows, trace.PoolID{})),
			Options{Conf: conf, Recorded: c.recorded, EmptyCacheRows: c.rows}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := res.Devices[0]
		if int64(d.EmptyCaches) != c.calls || d.Stats.NumDeviceAlloc != c.devAllocs || d.NumMismatches != 0 {
			t.Errorf("rows %v, recorded %v: %d calls, %d device mallocs, %d mismatches (%v); want %d, %d, 0",
				c.rows, c.recorded, d.EmptyCaches, d.Stats.NumDeviceAlloc, d.NumMismatches, d.Mismatches, c.calls, c.devAllocs)
		}
	}
}

// The first allocation of a CUDA graph's private pool comes after the
// empty_cache() with which the capture starts: one call, whether the
// trace states it (a row) or the replay infers it, not a second one for
// the pool (each call synchronizes: num_sync_all_streams counts them).
func TestEmptyCacheBeforePool(t *testing.T) {
	for _, rows := range []bool{true, false} {
		res, err := Run(context.Background(), NewSliceSource(emptyCacheTrace(rows, trace.PoolID{A: 1, B: 1})),
			Options{Conf: allocator.DefaultConf(), Recorded: true, EmptyCacheRows: rows}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := res.Devices[0]
		if d.EmptyCaches != 1 || d.Stats.NumSyncAllStreams != 1 || d.NumMismatches != 0 {
			t.Errorf("rows %v: %d calls, num_sync_all_streams %d, %d mismatches (%v); want 1, 1, 0",
				rows, d.EmptyCaches, d.Stats.NumSyncAllStreams, d.NumMismatches, d.Mismatches)
		}
	}
}

// oomTrace is a run under a 60 MiB limit that holds a 40 MiB block, fails
// to allocate 40 MiB more (the OOM's flush releases nothing: the segment
// is in use), frees the block as the exception unwinds, and then, if
// caught, allocates 20 MiB in its place; released says the program's
// empty_cache() released the freed segment before that.
func oomTrace(caught, released bool) []trace.Event {
	const seg, size = 0x7f0000000000, 40 << 20
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: seg, Size: size},
		{Kind: trace.KindAlloc, Addr: seg, Size: size},
		{Kind: trace.KindOOM, Size: size},
		{Kind: trace.KindFreeRequested, Addr: seg, Size: size},
		{Kind: trace.KindFreeCompleted, Addr: seg, Size: size},
	}
	if released {
		evs = append(evs,
			trace.Event{Kind: trace.KindSegmentFree, Addr: seg, Size: size},
			trace.Event{Kind: trace.KindSegmentAlloc, Addr: seg, Size: 20 << 20})
	}
	if caught {
		evs = append(evs, trace.Event{Kind: trace.KindAlloc, Addr: seg, Size: 20 << 20})
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	return evs
}

// A program said to empty the cache when it catches an OOM makes the call
// right after the OOM: the inference adds it where the recording shows no
// release (PyTorch counts its synchronize all the same), not after an OOM
// the program did not survive, and not where a release shows the call.
// Replayed from the row, the call comes before the block is freed, so it
// releases nothing, and the 20 MiB reuse the freed block.
func TestEmptyCacheAfterOOM(t *testing.T) {
	const limit = 60 << 20
	for _, c := range []struct {
		name             string
		said             bool
		caught, released bool
		rows             []int64 // Seqs of the rows found
		syncs            int64
	}{
		{name: "caught", said: true, caught: true, rows: []int64{3}, syncs: 2},
		{name: "not said", said: false, caught: true, syncs: 1},
		{name: "uncaught", said: true, caught: false, syncs: 1},
		{name: "released", said: true, caught: true, released: true, rows: []int64{5}, syncs: 2},
	} {
		var rows []trace.Event
		res, err := Run(context.Background(), NewSliceSource(oomTrace(c.caught, c.released)), Options{Conf: allocator.DefaultConf(),
			MemoryLimit: limit, Recorded: true, EmptyCacheAfterOOM: c.said, EmptyCacheFound: func(first *trace.Event, released int64) {
				rows = append(rows, trace.Event{Seq: first.Seq, Kind: trace.KindEmptyCache, Size: released, Stack: trace.NoStack})
			}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := res.Devices[0]
		var seqs []int64
		for _, r := range rows {
			seqs = append(seqs, r.Seq)
		}
		if !slices.Equal(seqs, c.rows) || d.Stats.NumSyncAllStreams != c.syncs || d.NumMismatches != 0 || len(d.OOMs) != 1 {
			t.Errorf("%s: rows before %v, num_sync_all_streams %d, %d mismatches (%v), %d OOMs; want rows before %v, %d, 0, 1",
				c.name, seqs, d.Stats.NumSyncAllStreams, d.NumMismatches, d.Mismatches, len(d.OOMs), c.rows, c.syncs)
		}
		if c.name != "caught" {
			continue
		}
		// The trace as import writes it, replayed as under other settings.
		evs := oomTrace(true, false)
		withRow := append(append(slices.Clone(evs[:3]), rows[0]), evs[3:]...)
		res, err = Run(context.Background(), NewSliceSource(withRow), Options{Conf: allocator.DefaultConf(), MemoryLimit: limit,
			EmptyCacheRows: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Devices[0]; d.Stats.NumSyncAllStreams != 2 || d.Stats.NumDeviceFree != 0 {
			t.Errorf("from the row: num_sync_all_streams %d, num_device_free %d; want 2, 0 (the call before the free)",
				d.Stats.NumSyncAllStreams, d.Stats.NumDeviceFree)
		}
	}
}

// A MemPool's request that finds no block in its pool runs garbage
// collection on the default pools even where they hold a block that would
// fit it: a run of releases followed by the request's new segment is the
// malloc's, not an empty_cache() call, whatever the default pools hold.
func TestGarbageCollectionForPrivatePool(t *testing.T) {
	const s1, s2, p, mib = 0x7f0000000000, 0x7f1000000000, 0x7f2000000000, 1 << 20
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: s1, Size: 16 * mib},
		{Kind: trace.KindAlloc, Addr: s1, Size: 16 * mib},
		{Kind: trace.KindFreeRequested, Addr: s1, Size: 16 * mib},
		{Kind: trace.KindFreeCompleted, Addr: s1, Size: 16 * mib},
		{Kind: trace.KindSegmentAlloc, Addr: s2, Size: 40 * mib},
		{Kind: trace.KindAlloc, Addr: s2, Size: 40 * mib},
		// 56 MiB reserved, past the threshold: the MemPool's 12 MiB
		// request, which s1 would fit in the default pools, has garbage
		// collection release s1 first.
		{Kind: trace.KindSegmentFree, Addr: s1, Size: 16 * mib},
		{Kind: trace.KindSegmentAlloc, Addr: p, Size: 12 * mib},
		{Kind: trace.KindAlloc, Addr: p, Size: 12 * mib, Pool: trace.PoolID{B: 1}},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	conf, err := allocator.ParseConf("garbage_collection_threshold:0.5")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: conf, MemoryLimit: 100 << 20, Recorded: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Devices[0]; d.EmptyCaches != 0 || d.Stats.NumSyncAllStreams != 0 || d.NumMismatches != 0 {
		t.Errorf("%d empty_cache calls, num_sync_all_streams %d, %d mismatches (%v); want 0, 0, 0",
			d.EmptyCaches, d.Stats.NumSyncAllStreams, d.NumMismatches, d.Mismatches)
	}
}
