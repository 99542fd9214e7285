package replay

import (
	"context"
	"math/rand/v2"
	"slices"
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
		var x suffixes
		x.add(tc.r)
		if got := x.repeat(tc.w); got != tc.want {
			t.Errorf("%v repeats %v: %v, want %v", tc.r, tc.w, got, tc.want)
		}
		if got := repeatsRef(tc.r, tc.w); got != tc.want {
			t.Errorf("repeatsRef(%v, %v) = %v, want %v", tc.r, tc.w, got, tc.want)
		}
	}
}

// repeatsRef is the definition of a repeat (suffixes), compared pair by
// pair: r, less k leading allocations, is the last n of w, n at least two
// and at least half of w's.
func repeatsRef(r, w []int64) bool {
	for k := 0; k < len(r); k++ {
		n := len(r) - k
		if n < 2 || 2*n < len(w) {
			break
		}
		if n <= len(w) && slices.Equal(r[k:], w[len(w)-n:]) {
			return true
		}
	}
	return false
}

// TestSuffixesRef: suffixes answers as repeatsRef over every later
// episode, on random episodes of few distinct sizes (many near repeats).
func TestSuffixesRef(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		eps := make([][]int64, 1+rng.IntN(8))
		for i := range eps {
			for range rng.IntN(7) {
				eps[i] = append(eps[i], int64(1+rng.IntN(3)))
			}
		}
		var x suffixes
		x.reset()
		for i := len(eps) - 1; i >= 0; i-- {
			want := slices.ContainsFunc(eps[i+1:], func(r []int64) bool { return repeatsRef(r, eps[i]) })
			if got := x.repeat(eps[i]); got != want {
				t.Fatalf("trial %d: episode %d of %v repeated: %v, want %v", trial, i, eps, got, want)
			}
			x.add(eps[i])
		}
	}
}

// TestWork_laterCaptures: a graph pool of 20,000 episodes of 8
// allocations that end alike (two scalars) and repeat none of each other:
// later looks each up in the suffixes of the later ones at a cost of its
// length (at most 16 steps an episode, 8 to add and 4 to look up), not by
// comparing it with every later episode that ends alike (2·10^8
// comparisons).
func TestWork_laterCaptures(t *testing.T) {
	const n, l = 20000, 8
	var c captures
	eps := make([][]int64, n)
	for i := range eps {
		for k := range l - 2 {
			eps[i] = append(eps[i], int64(1+i*l+k)*512)
		}
		eps[i] = append(eps[i], 8, 8)
	}
	episodes(&c, allocator.PoolID{A: 1}, eps...)
	suffixVisits.Store(0)
	if got := c.later(); got != n-1 {
		t.Errorf("%d later captures, want %d", got, n-1)
	}
	if v := suffixVisits.Load(); v > 2*l*n {
		t.Errorf("later took %d steps for %d episodes of %d allocations, want at most %d", v, n, l, 2*l*n)
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

// TestCapturesHeap: 100,000 graph pools of one episode of one allocation
// each (a CUDA graph a segment) make no heap object an episode: their
// sizes lie in one slice and the episodes in another, so the collector
// has no 100,000 small slices to scan and the heap objects made grow
// with the maps' tables, not with the episodes.
func TestCapturesHeap(t *testing.T) {
	const n = 100000
	var c captures
	evs := make([]trace.Event, n)
	for i := range evs {
		evs[i] = trace.Event{Kind: trace.KindAlloc, Size: 512, Stream: 7}
	}
	defaultEv := &trace.Event{Kind: trace.KindAlloc, Size: 4, Stream: 0}
	allocs := testing.AllocsPerRun(1, func() {
		c = captures{}
		for i := range evs {
			c.allocIn(allocator.PoolID{A: 1, B: uint64(i + 1)}, &evs[i], true)
			c.allocIn(allocator.PoolID{}, defaultEv, false)
		}
	})
	if allocs > n/10 {
		t.Errorf("%d one-allocation episodes made %.0f heap objects, want at most %d", n, allocs, n/10)
	}
	if got := c.later(); got != 0 {
		t.Errorf("%d later captures, want 0 (every episode a first)", got)
	}
}
