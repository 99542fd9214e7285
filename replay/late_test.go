package replay

import (
	"context"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// A malloc's retry under a limit, as PyTorch records it: a 12 MiB block
// freed while another stream used it is pending; the next malloc of 11 MiB
// finds no block, cannot grow, synchronizes (the block's free_completed),
// releases the segment and makes a new one. The completion lies before the
// alloc in the recording but came within its malloc: the replay must not
// let the malloc's search find the block, and reproduces the recording
// with one retry and no empty_cache() call, whether the trace states its
// calls (rows: the releases are outcomes) or the replay infers them.
func TestRetryCompletions(t *testing.T) {
	const seg, seg2, mib = 0x7f0000000000, 0x7f0001000000, 1 << 20
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: seg, Size: 12 * mib},
		{Kind: trace.KindAlloc, Addr: seg, Size: 11 * mib},
		{Kind: trace.KindFreeRequested, Addr: seg, Size: 11 * mib}, // pending: no free_completed follows
		{Kind: trace.KindSegmentAlloc, Addr: seg2, Size: 12 * mib},
		{Kind: trace.KindAlloc, Addr: seg2, Size: 11 * mib},
		{Kind: trace.KindFreeCompleted, Addr: seg, Size: 11 * mib}, // the retry's synchronize
		{Kind: trace.KindSegmentFree, Addr: seg, Size: 12 * mib},
		{Kind: trace.KindSegmentAlloc, Addr: seg, Size: 12 * mib},
		{Kind: trace.KindAlloc, Addr: seg, Size: 11 * mib},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	for _, rows := range []bool{true, false} {
		res, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf(),
			MemoryLimit: 24 * mib, Recorded: true, EmptyCacheRows: rows}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := res.Devices[0]
		if d.NumMismatches != 0 || d.EmptyCaches != 0 || d.Stats.NumAllocRetries != 1 || d.Stats.NumSyncAllStreams != 1 {
			t.Errorf("rows %v: %d mismatches (%v), %d empty_cache calls, %d retries, %d synchronizes; want 0, 0, 1, 1",
				rows, d.NumMismatches, d.Mismatches, d.EmptyCaches, d.Stats.NumAllocRetries, d.Stats.NumSyncAllStreams)
		}
	}
}
