package record

import (
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// graphAllocs returns the allocations of evs into CUDA graph pools, by
// pool.
func graphAllocs(evs []trace.Event) map[trace.PoolID][]trace.Event {
	by := map[trace.PoolID][]trace.Event{}
	for _, ev := range evs {
		if ev.Kind == trace.KindAlloc && ev.Pool.A != 0 {
			by[ev.Pool] = append(by[ev.Pool], ev)
		}
	}
	return by
}

// TestImport_graphSegmentReborn: in the pairs' cuda_graph run under a
// limit, the first capture's pool made a segment at the address of a
// segment that the warm-up on a side stream had made and torch.cuda.graph's
// empty_cache() released. The dump names the later segment's pool; the
// side stream's allocations in the earlier one are not that pool's.
func TestImport_graphSegmentReborn(t *testing.T) {
	evs := importPair(t, "cuda_graph__retry")
	pool := trace.PoolID{A: 1}
	allocs := graphAllocs(evs)[pool]
	if len(allocs) == 0 {
		t.Fatalf("no allocation in the dumped graph pool %v", pool)
	}
	for _, ev := range allocs {
		if ev.Stream != allocs[0].Stream {
			t.Fatalf("seq %d: an allocation on stream %d in pool %v, whose capture ran on stream %d",
				ev.Seq, ev.Stream, pool, allocs[0].Stream)
		}
	}
}

// TestImport_captureFirstSegment: in the pairs' cuda_graph run under
// defaults, the first capture's first request (after capture_begin's two
// 8-byte allocations in the default pools) made a segment of its own,
// which the final empty_cache() released; the capture's later requests
// are in segments the dump names. The first request is the dumped pool's
// too, not the default pools' nor a pool of its own.
func TestImport_captureFirstSegment(t *testing.T) {
	evs := importPair(t, "cuda_graph__default")
	pool := trace.PoolID{A: 1}
	allocs := graphAllocs(evs)
	if len(allocs) != 2 {
		t.Errorf("%d graph pools, want 2 (the first and the third capture's, and the second's)", len(allocs))
	}
	stream := allocs[pool][0].Stream
	for _, ev := range evs {
		if ev.Kind == trace.KindAlloc && ev.Stream == stream && ev.Size > 8 {
			if ev.Pool != pool {
				t.Errorf("seq %d: the first capture's first request is in pool %v, want %v", ev.Seq, ev.Pool, pool)
			}
			break
		}
	}
}
