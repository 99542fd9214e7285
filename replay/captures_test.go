package replay

import (
	"context"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// episodes feeds c the allocations of eps, each a run into pool p on
// stream 7 (the first a first episode), with one into the default pools
// after each.
func episodes(c *captures, p allocator.PoolID, eps ...[]int64) {
	for i, e := range eps {
		for k, size := range e {
			c.allocIn(p, &trace.Event{Kind: trace.KindAlloc, Size: size, Stream: 7}, i == 0 && k == 0)
		}
		c.allocIn(allocator.PoolID{}, &trace.Event{Kind: trace.KindAlloc, Size: 4, Stream: 0}, false)
	}
}

// TestCapturesTree: torch.compile(mode="reduce-overhead") on three shapes
// (the pairs' compile_ro), as its allocations into the graph trees' pool
// show: three warm-ups, then three recordings, each the copy of its input
// and then its warm-up's requests (the first warm-up allocates the RNG
// state before). The recordings are captures, the warm-ups after the
// first are not.
func TestCapturesTree(t *testing.T) {
	var c captures
	w1 := []int64{8, 8, mib, 32 * mib, mib / 4, mib / 4, mib}
	w2 := []int64{4 * mib, 32 * mib, mib, mib, mib}
	w3 := []int64{16 * mib, 32 * mib, 4 * mib, 4 * mib, mib}
	r1 := []int64{mib / 4, mib, 32 * mib, mib / 4, mib / 4, mib}
	r2 := append([]int64{mib}, w2...)
	r3 := append([]int64{4 * mib}, w3...)
	episodes(&c, allocator.PoolID{A: 1}, w1, w2, w3, r1, r2, r3)
	if n := c.later(); n != 3 {
		t.Errorf("%d later captures, want the 3 recordings", n)
	}
}

// TestCapturesShared: torch.cuda.graph twice into one pool (the pairs'
// cuda_graph, pool=g1.pool()): the second is a capture, which no later
// episode repeats.
func TestCapturesShared(t *testing.T) {
	var c captures
	episodes(&c, allocator.PoolID{A: 1}, []int64{4 * mib, 32 * mib, mib, 4 * mib, 4 * mib, 4 * mib, 4 * mib},
		[]int64{4 * mib, 4 * mib, 4 * mib, 4 * mib})
	if n := c.later(); n != 1 {
		t.Errorf("%d later captures, want 1", n)
	}
}

func TestRepeats(t *testing.T) {
	for _, tc := range []struct {
		r, w []int64
		want bool
	}{
		{[]int64{1, 2, 3}, []int64{2, 3}, true},          // one input copied
		{[]int64{1, 1, 2, 3}, []int64{9, 9, 2, 3}, true}, // two, and the warm-up's first allocations
		{[]int64{2, 3}, []int64{2, 3}, true},             // no input copied: all static
		{[]int64{1, 2}, []int64{2}, false},               // too short to tell
		{[]int64{2}, []int64{2}, false},
		{[]int64{1, 2, 3}, []int64{5, 6, 7, 2, 3}, false},
		{[]int64{1, 2, 4}, []int64{2, 3}, false},
	} {
		if got := repeats(tc.r, tc.w); got != tc.want {
			t.Errorf("repeats(%v, %v) = %v, want %v", tc.r, tc.w, got, tc.want)
		}
	}
}

// TestCapturesAlias: a capture whose first request the inference gave a
// pool of its own, and whose next ones are in a pool the dump names, on
// the same stream: the invented pool is the named one.
func TestCapturesAlias(t *testing.T) {
	var c captures
	invented, named := allocator.PoolID{A: inventedPool | 1}, allocator.PoolID{A: 1}
	ev := &trace.Event{Kind: trace.KindAlloc, Size: 4 * mib, Stream: 7}
	if _, ok := c.allocIn(invented, ev, true); ok {
		t.Fatal("an alias at the first allocation")
	}
	if x, ok := c.allocIn(named, ev, true); !ok || x != invented {
		t.Fatalf("alias %v, %v; want %v", x, ok, invented)
	}
	// Not on another stream, nor for a pool met before.
	var d captures
	d.allocIn(invented, ev, true)
	if _, ok := d.allocIn(named, &trace.Event{Kind: trace.KindAlloc, Size: 4 * mib, Stream: 8}, true); ok {
		t.Error("an alias across streams")
	}
	var e captures
	e.allocIn(invented, ev, true)
	if _, ok := e.allocIn(named, ev, false); ok {
		t.Error("an alias to a pool met before")
	}
}

// TestSinceCall: capture_begin's two 8-byte allocations on the capture
// stream after torch.cuda.graph's empty_cache() leave the call right
// before the capture's first request; anything else between does not.
func TestSinceCall(t *testing.T) {
	alloc := func(size int64, stream uint64) *trace.Event {
		return &trace.Event{Kind: trace.KindAlloc, Size: size, Stream: stream}
	}
	var c sinceCall
	if c.before(alloc(mib, 7)) {
		t.Error("a call before any")
	}
	c.call()
	first := alloc(4*mib, 7)
	if !c.before(first) || c.prologue(first) {
		t.Error("right after the call: before, and no prologue")
	}
	c.request(alloc(8, 7))
	c.request(alloc(8, 7))
	if !c.before(first) || !c.prologue(first) {
		t.Error("after capture_begin's allocations: before, and the prologue")
	}
	if c.before(alloc(4*mib, 9)) || c.prologue(alloc(4*mib, 9)) {
		t.Error("another stream's request follows the call")
	}
	c.request(&trace.Event{Kind: trace.KindFreeRequested, Stream: 7})
	if c.before(first) {
		t.Error("a free came between")
	}
	c.call()
	c.request(alloc(16, 7))
	c.request(alloc(8, 7))
	if !c.before(first) || c.prologue(first) {
		t.Error("other allocations: before, but no prologue")
	}
}

// TestOOMInWarmup: a run under a limit that died of an OOM in a CUDA graph
// trees' warm-up (the pairs' compile_ro under a limit), whose pool the
// dump names (0, 1), as torch.cuda.graph_pool_handle() numbers it. The
// malloc was the pool's, during a capture-like use: PyTorch flushed no
// cache and counted no retry; num_sync_all_streams counts the trees'
// empty capture only, not the warm-up the run died in.
func TestOOMInWarmup(t *testing.T) {
	pool := trace.PoolID{B: 1}
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: 1 << 30, Size: 20 * mib, Stream: 5, Pool: pool},
		{Kind: trace.KindAlloc, Addr: 1 << 30, Size: 4 * mib, Stream: 5, Pool: pool},
		{Kind: trace.KindOOM, Size: 32 * mib, Stream: 5},
	}
	for i := range evs {
		evs[i].Seq, evs[i].TimeUs = int64(i), int64(i+1)
	}
	res, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf(), MemoryLimit: 40 * mib,
		Recorded: true, SkipCompare: true, Annotate: true, InferPools: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Devices[0].Stats
	if s.NumOOMs != 1 || s.NumAllocRetries != 0 || s.NumSyncAllStreams != 1 {
		t.Errorf("OOMs %d, retries %d, syncs %d; want 1, 0, 1", s.NumOOMs, s.NumAllocRetries, s.NumSyncAllStreams)
	}
	if evs[2].Pool != pool {
		t.Errorf("the OOM's pool is %v, want %v", evs[2].Pool, pool)
	}
}
