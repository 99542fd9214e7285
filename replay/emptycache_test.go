package replay

import (
	"context"
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
