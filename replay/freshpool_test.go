package replay

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// memPoolTrace is use_mem_pool on the legacy default stream between
// default-pool work, with no pool ids: a (default) keeps 16 MiB free; b is
// made although a could serve it (a MemPool's), and is then filled; c is
// too large for any cached block; d is made although a could serve it.
func memPoolTrace() []trace.Event {
	const a, b, c, d = 0x10000000, 0x20000000, 0x30000000, 0x40000000
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: a, Size: 20 * mib},
		{Kind: trace.KindAlloc, Addr: a, Size: 4 * mib},
		{Kind: trace.KindSegmentAlloc, Addr: b, Size: 20 * mib},
		{Kind: trace.KindAlloc, Addr: b, Size: 4 * mib},
		{Kind: trace.KindAlloc, Addr: b + 4*mib, Size: 16 * mib},
		{Kind: trace.KindSegmentAlloc, Addr: c, Size: 30 * mib},
		{Kind: trace.KindAlloc, Addr: c, Size: 30 * mib},
		{Kind: trace.KindSegmentAlloc, Addr: d, Size: 20 * mib},
		{Kind: trace.KindAlloc, Addr: d, Size: 8 * mib},
	}
	for i := range evs {
		evs[i].Seq, evs[i].TimeUs, evs[i].Stack = int64(i), int64(i), trace.NoStack
	}
	return evs
}

// TestInferPools_memPoolBackToDefault: on stream 0, a new segment that the
// default pools had no room for goes to them even right after a MemPool's
// allocation: a program allocates mostly outside its MemPool.
func TestInferPools_memPoolBackToDefault(t *testing.T) {
	evs := memPoolTrace()
	annotatePools(t, evs)
	if p := evs[3].Pool; p.A != 0 || p.B == 0 {
		t.Fatalf("b's alloc has pool %v, want a MemPool", p)
	}
	if p := evs[6].Pool; !p.IsDefault() {
		t.Errorf("c's alloc has pool %v, want the default pools", p)
	}
}

// TestInferPools_memPoolRejoin: a new segment that the default pools had
// room for goes to the MemPool met before, which had none, rather than to
// a new pool.
func TestInferPools_memPoolRejoin(t *testing.T) {
	evs := memPoolTrace()
	res := annotatePools(t, evs)
	if evs[8].Pool != evs[3].Pool {
		t.Errorf("d's alloc has pool %v, want b's, %v", evs[8].Pool, evs[3].Pool)
	}
	if n := res.Devices[0].InferredPools; n != 1 {
		t.Errorf("%d pools invented, want 1", n)
	}
}

// TestPoolFlips: a flipped alloc inferred to the default pools goes to a
// MemPool, and one inferred to a MemPool goes to the default pools.
func TestPoolFlips(t *testing.T) {
	flipped := func(i int) []trace.Event {
		evs := memPoolTrace()
		flips := map[AllocKey]bool{{TimeUs: evs[i].TimeUs, Addr: evs[i].Addr}: true}
		_, err := Run(t.Context(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf(),
			Recorded: true, SkipCompare: true, Annotate: true, InferPools: true, PoolFlips: flips}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	if p := flipped(1)[1].Pool; p.A != 0 || p.B == 0 {
		t.Errorf("a's alloc, flipped, has pool %v, want a MemPool", p)
	}
	if p := flipped(3)[3].Pool; !p.IsDefault() {
		t.Errorf("b's alloc, flipped, has pool %v, want the default pools", p)
	}
}

// TestLeftAt: the model that puts a recorded alloc elsewhere reports
// where, before Left.
func TestLeftAt(t *testing.T) {
	const a = 0x10000000
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: a, Size: 20 * mib},
		{Kind: trace.KindAlloc, Addr: a, Size: 4 * mib},
		{Kind: trace.KindFreeRequested, Addr: a, Size: 4 * mib},
		{Kind: trace.KindFreeCompleted, Addr: a, Size: 4 * mib},
		{Kind: trace.KindAlloc, Addr: a + 8*mib, Size: 4 * mib},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	var calls []string
	_, err := Run(t.Context(), NewSliceSource(evs), Options{Conf: allocator.DefaultConf(), Recorded: true, SkipCompare: true, Annotate: true,
		LeftAt: func(ev *trace.Event, addr uint64) { calls = append(calls, fmt.Sprintf("at %d %#x", ev.Seq, addr)) },
		Left:   func(ev *trace.Event) { calls = append(calls, fmt.Sprintf("left %d", ev.Seq)) }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"at 4 0x10000000", "left 4"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
}
