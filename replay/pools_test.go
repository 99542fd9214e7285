package replay

import (
	"context"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

const mib = 1 << 20

// captureTrace is a CUDA graph capture as torch 2.11 records it, with no
// pool ids: on stream 7, a default-pool segment keeps a block while the rest
// of it is free (so the capture's empty_cache cannot return it); the capture
// then makes a new segment for a request that free rest could serve (so the
// capture's pool made it), puts a second block after the first, and frees
// both; an empty_cache after the graph is destroyed frees both segments.
func captureTrace() []trace.Event {
	const a, b = 0x10000000, 0x20000000
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: a, Size: 20 * mib, Stream: 7},
		{Kind: trace.KindAlloc, Addr: a, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindAlloc, Addr: a + 4*mib, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindFreeRequested, Addr: a + 4*mib, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindFreeCompleted, Addr: a + 4*mib, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindSegmentAlloc, Addr: b, Size: 20 * mib, Stream: 7},
		{Kind: trace.KindAlloc, Addr: b, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindAlloc, Addr: b + 4*mib, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindFreeRequested, Addr: b, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindFreeCompleted, Addr: b, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindFreeRequested, Addr: b + 4*mib, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindFreeCompleted, Addr: b + 4*mib, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindFreeRequested, Addr: a, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindFreeCompleted, Addr: a, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindSegmentFree, Addr: a, Size: 20 * mib, Stream: 7},
		{Kind: trace.KindSegmentFree, Addr: b, Size: 20 * mib, Stream: 7},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	return evs
}

func annotatePools(t *testing.T, evs []trace.Event) *Result {
	t.Helper()
	res, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf(),
		Recorded: true, SkipCompare: true, Annotate: true, InferPools: true,
		Left: func(ev *trace.Event) { t.Errorf("the model left the recording at seq %d", ev.Seq) }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestInferPools: the annotation tags the capture's allocations and its
// segment's free with one private (graph) pool, and the default-pool ones
// with none.
func TestInferPools(t *testing.T) {
	evs := captureTrace()
	annotatePools(t, evs)
	p := evs[6].Pool
	if p.IsDefault() || p.A == 0 {
		t.Fatalf("the capture's alloc has pool %v, want a graph pool", p)
	}
	for _, i := range []int{7, 15} {
		if evs[i].Pool != p {
			t.Errorf("event %d (%s) has pool %v, want %v", i, evs[i].Kind, evs[i].Pool, p)
		}
	}
	for _, i := range []int{1, 2, 14} {
		if !evs[i].Pool.IsDefault() {
			t.Errorf("event %d (%s) has pool %v, want the default pools", i, evs[i].Kind, evs[i].Pool)
		}
	}
}

// TestInferPools_memPool: a pool first met on stream 0 is a MemPool (graph
// captures never run on the legacy default stream).
func TestInferPools_memPool(t *testing.T) {
	evs := captureTrace()
	for i := range evs {
		evs[i].Stream = 0
	}
	annotatePools(t, evs)
	if p := evs[6].Pool; p.A != 0 || p.B == 0 {
		t.Fatalf("the alloc has pool %v, want a MemPool", p)
	}
}

// TestReleasePools: an empty_cache that frees a private pool's segment
// releases the pool first, as PyTorch does once the graph is destroyed: the
// replay returns both segments, in the annotation and in a replay of the
// tagged trace under other settings.
func TestReleasePools(t *testing.T) {
	evs := captureTrace()
	res := annotatePools(t, evs)
	check := func(what string, res *Result) {
		t.Helper()
		st := res.Devices[0].Stats
		if got := st.Segment[0].Current; got != 0 {
			t.Errorf("%s: %d segments left, want 0", what, got)
		}
		if st.NumDeviceFree != 2 {
			t.Errorf("%s: num_device_free %d, want 2", what, st.NumDeviceFree)
		}
	}
	check("annotating", res)
	conf, err := allocator.ParseConf("max_split_size_mb:64")
	if err != nil {
		t.Fatal(err)
	}
	res, err = Run(context.Background(), NewSliceSource(evs), Options{Conf: conf}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("replayed", res)
}

// TestEmptyCaches_memPool: releases that begin with a MemPool's segments are
// that pool's own empty_cache (its destruction) and then a
// torch.cuda.empty_cache(): two flushes, each counted in
// num_sync_all_streams.
func TestEmptyCaches_memPool(t *testing.T) {
	const a, b = 0x10000000, 0x20000000
	pool := trace.PoolID{B: 1}
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: a, Size: 20 * mib, Pool: pool},
		{Kind: trace.KindAlloc, Addr: a, Size: 4 * mib, Pool: pool},
		{Kind: trace.KindSegmentAlloc, Addr: b, Size: 20 * mib},
		{Kind: trace.KindAlloc, Addr: b, Size: 4 * mib},
		{Kind: trace.KindFreeRequested, Addr: a, Size: 4 * mib},
		{Kind: trace.KindFreeCompleted, Addr: a, Size: 4 * mib},
		{Kind: trace.KindFreeRequested, Addr: b, Size: 4 * mib},
		{Kind: trace.KindFreeCompleted, Addr: b, Size: 4 * mib},
		{Kind: trace.KindSegmentFree, Addr: a, Size: 20 * mib, Pool: pool},
		{Kind: trace.KindSegmentFree, Addr: b, Size: 20 * mib},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	res, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Devices[0]
	if d.Stats.NumSyncAllStreams != 2 || d.EmptyCaches != 2 || d.Stats.Segment[0].Current != 0 {
		t.Errorf("num_sync_all_streams %d, %d empty caches, %d segments left; want 2, 2, 0",
			d.Stats.NumSyncAllStreams, d.EmptyCaches, d.Stats.Segment[0].Current)
	}
}

// withRow returns evs with an empty_cache row inserted before event i, and
// every Seq renumbered.
func withRow(evs []trace.Event, i int) []trace.Event {
	out := append([]trace.Event(nil), evs[:i]...)
	out = append(out, trace.Event{Kind: trace.KindEmptyCache, Stack: trace.NoStack})
	out = append(out, evs[i:]...)
	for j := range out {
		out[j].Seq = int64(j)
	}
	return out
}

// TestReleasePools_rows: with empty_cache rows (the import's traces), the
// recorded releases after a row are outcomes, yet they still tell which
// private pools its call found released: the annotation, which tags them,
// and a replay of the tagged trace under other settings both return the
// capture's segment.
func TestReleasePools_rows(t *testing.T) {
	evs := withRow(captureTrace(), 14)
	res, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf(),
		Recorded: true, SkipCompare: true, Annotate: true, InferPools: true, EmptyCacheRows: true,
		Left: func(ev *trace.Event) { t.Errorf("the model left the recording at seq %d", ev.Seq) }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := evs[16].Pool; p.IsDefault() {
		t.Fatalf("the capture segment's release has no pool")
	}
	conf, err := allocator.ParseConf("max_split_size_mb:64")
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: conf, EmptyCacheRows: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for what, res := range map[string]*Result{"annotating": res, "replayed": replayed} {
		d := res.Devices[0]
		if d.Stats.Segment[0].Current != 0 || d.Stats.NumDeviceFree != 2 || d.EmptyCaches != 2 {
			t.Errorf("%s: %d segments left, num_device_free %d, %d empty caches; want 0, 2, 2 (the capture's and the row's)",
				what, d.Stats.Segment[0].Current, d.Stats.NumDeviceFree, d.EmptyCaches)
		}
	}
}

// TestEmptyCaches_memPoolRow: a row whose releases begin with a MemPool's
// segments is that pool's own empty_cache, then a torch.cuda.empty_cache(),
// as without rows (TestEmptyCaches_memPool).
func TestEmptyCaches_memPoolRow(t *testing.T) {
	const a, b = 0x10000000, 0x20000000
	pool := trace.PoolID{B: 1}
	evs := withRow([]trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: a, Size: 20 * mib, Pool: pool},
		{Kind: trace.KindAlloc, Addr: a, Size: 4 * mib, Pool: pool},
		{Kind: trace.KindSegmentAlloc, Addr: b, Size: 20 * mib},
		{Kind: trace.KindAlloc, Addr: b, Size: 4 * mib},
		{Kind: trace.KindFreeRequested, Addr: a, Size: 4 * mib},
		{Kind: trace.KindFreeCompleted, Addr: a, Size: 4 * mib},
		{Kind: trace.KindFreeRequested, Addr: b, Size: 4 * mib},
		{Kind: trace.KindFreeCompleted, Addr: b, Size: 4 * mib},
		{Kind: trace.KindSegmentFree, Addr: a, Size: 20 * mib, Pool: pool},
		{Kind: trace.KindSegmentFree, Addr: b, Size: 20 * mib},
	}, 8)
	for i := range evs {
		evs[i].Stack = trace.NoStack
	}
	res, err := Run(context.Background(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf(), EmptyCacheRows: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Devices[0]
	if d.Stats.NumSyncAllStreams != 2 || d.EmptyCaches != 2 || d.Stats.Segment[0].Current != 0 {
		t.Errorf("num_sync_all_streams %d, %d empty caches, %d segments left; want 2, 2, 0",
			d.Stats.NumSyncAllStreams, d.EmptyCaches, d.Stats.Segment[0].Current)
	}
}
