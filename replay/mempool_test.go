package replay

import (
	"context"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// A MemPool that the inference finds on stream 0 takes the id the snapshot
// names (its dumped segments') that is the next in PyTorch's numbering,
// rather than a new one: the pool's first segments, released before the
// dump, and its later ones are one pool. Where the next id is not named
// (a pool made before it died before the dump), it takes a new one.
func TestInferPools_namedMemPool(t *testing.T) {
	for _, c := range []struct {
		named []allocator.PoolID
		want  trace.PoolID
	}{
		{[]allocator.PoolID{{B: 3}, {B: 1}, {A: 1}}, trace.PoolID{B: 1}},
		{[]allocator.PoolID{{B: 2}}, trace.PoolID{B: inventedPool | 1}},
	} {
		evs := captureTrace()
		for i := range evs {
			evs[i].Stream = 0
		}
		_, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf(),
			Recorded: true, SkipCompare: true, Annotate: true, InferPools: true, NamedPools: c.named}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{6, 7, 15} {
			if evs[i].Pool != c.want {
				t.Errorf("named %v: event %d (%s) has pool %v, want %v", c.named, i, evs[i].Kind, evs[i].Pool, c.want)
			}
		}
	}
}

// A request that fails inside use_mem_pool fails in the MemPool, which had
// no room, without freeing the cache (a pool is being allocated to), while
// the default pools had a block for it: the recorded OOM, which names no
// pool, is replayed in the pool its stream allocated from last, and the
// annotation tags it so.
func TestOOMInMemPool(t *testing.T) {
	const a, b = 0x10000000, 0x20000000
	pool := trace.PoolID{B: 1}
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: a, Size: 20 * mib},
		{Kind: trace.KindAlloc, Addr: a, Size: 4 * mib}, // 16 MiB of the default pools free
		{Kind: trace.KindSegmentAlloc, Addr: b, Size: 18 * mib, Pool: pool},
		{Kind: trace.KindAlloc, Addr: b, Size: 18 * mib, Pool: pool},
		{Kind: trace.KindOOM, Size: 4 * mib},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	res, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf(), MemoryLimit: 40 * mib,
		Recorded: true, Annotate: true, InferPools: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Devices[0]
	if d.NumMismatches != 0 || d.AvoidedOOMs != 0 || d.Stats.NumOOMs != 1 || d.Stats.NumAllocRetries != 0 || d.Stats.NumSyncAllStreams != 0 {
		t.Errorf("%d mismatches (%v), %d OOMs avoided, %d OOMs, %d retries, %d synchronizes; want 0, 0, 1, 0, 0",
			d.NumMismatches, d.Mismatches, d.AvoidedOOMs, d.Stats.NumOOMs, d.Stats.NumAllocRetries, d.Stats.NumSyncAllStreams)
	}
	if evs[4].Pool != pool {
		t.Errorf("the OOM has pool %v, want %v", evs[4].Pool, pool)
	}
}
