package replay

import (
	"math/bits"
	"math/rand"
	"runtime"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

func init() { checkMemIndex, countVisits = true, true }

// churnTrace is the growth benchmark's snapshot-segment-churn on stream 0:
// n 2 MiB segments each made by a 512-byte alloc, although the blocks
// cached before could serve it (each infers a new MemPool, with room).
func churnTrace(n int) []trace.Event {
	var evs []trace.Event
	for i := range n {
		a := uint64(0x100000000) + uint64(i)*2*mib
		evs = append(evs,
			trace.Event{Kind: trace.KindSegmentAlloc, Addr: a, Size: 2 * mib},
			trace.Event{Kind: trace.KindAlloc, Addr: a, Size: 512})
	}
	for i := range evs {
		evs[i].Seq, evs[i].TimeUs, evs[i].Stack = int64(i), int64(i), trace.NoStack
	}
	return evs
}

// TestOtherPoolWork: a fresh segment on stream 0 looks at O(log n) of the
// n MemPools met before, not at all of them (the scan made the import of
// the churn quadratic).
func TestOtherPoolWork(t *testing.T) {
	for _, n := range []int{256, 4096} {
		visits := noRoomVisits.Load()
		checkMemIndex = false // the check scans
		res, err := Run(t.Context(), NewSliceSource(churnTrace(n)), Options{Conf: allocator.DefaultConf(),
			Recorded: true, SkipCompare: true, Annotate: true, InferPools: true}, nil)
		checkMemIndex = true
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Devices[0].InferredPools; got != n-1 {
			t.Fatalf("n=%d: %d pools invented, want %d", n, got, n-1)
		}
		bound := 4 * bits.Len(uint(n))
		if d := noRoomVisits.Load() - visits; d > int64(n*bound) {
			t.Fatalf("n=%d: %d pools visited over %d fresh segments, more than %d each", n, d, n, bound)
		}
	}
}

// TestMemIndexMatchesScan: on an allocator driven at random (mallocs in
// the default pools and in MemPools of both size classes, frees, pools
// released, empty_cache calls), the index's answer is the scan's for
// requests of every size and class, with and without a pool excluded,
// checking at most the answer and the pool excluded.
func TestMemIndexMatchesScan(t *testing.T) {
	for seed := range int64(6) {
		rng := rand.New(rand.NewSource(seed))
		a, err := allocator.New(allocator.DefaultConf(), allocator.NewSimDevice(1<<40))
		if err != nil {
			t.Fatal(err)
		}
		r := &deviceReplay{a: a, annotate: true, opts: &Options{InferPools: true}}
		type live struct {
			addr uint64
			pool allocator.PoolID
		}
		var blocks []live
		var found, none int
		pools := 4 + int(seed)*8
		size := func() int64 {
			if rng.Intn(2) == 0 {
				return int64(512 * (1 + rng.Intn(2048))) // small class
			}
			return int64(mib + rng.Intn(24*mib))
		}
		for step := range 6000 {
			switch op := rng.Intn(20); {
			case op < 8: // a malloc, in a MemPool or the default pools
				p := allocator.PoolID{}
				if rng.Intn(4) != 0 {
					p = allocator.PoolID{B: uint64(1 + rng.Intn(pools))}
					if _, err := r.beginPool(p, 0, true); err != nil {
						t.Fatal(err)
					}
				}
				addr, err := a.Malloc(size(), 0)
				if !p.IsDefault() {
					a.EndAllocateToPool(p)
				}
				if err != nil {
					t.Fatal(err)
				}
				r.allocated(&trace.Event{Addr: addr}, p)
				blocks = append(blocks, live{addr, p})
			case op < 14 && len(blocks) > 0: // a free
				i := rng.Intn(len(blocks))
				if err := a.Free(blocks[i].addr); err != nil {
					t.Fatal(err)
				}
				blocks[i] = blocks[len(blocks)-1]
				blocks = blocks[:len(blocks)-1]
			case op == 14: // a MemPool destroyed
				r.releasePool(allocator.PoolID{B: uint64(1 + rng.Intn(pools))})
			case op == 15:
				if err := a.EmptyCache(); err != nil {
					t.Fatal(err)
				}
			default: // the question, for a request and a pool excluded
				ev := &trace.Event{Size: size()}
				not := allocator.PoolID{}
				if rng.Intn(2) == 0 {
					not = allocator.PoolID{B: uint64(1 + rng.Intn(pools))}
				}
				v := noRoomVisits.Load()
				got, ok := r.noRoomMemPool(ev, false, not)
				v = noRoomVisits.Load() - v
				want := r.scanMemPools(ev, false, not)
				if !ok || got != want {
					t.Fatalf("seed %d step %d: index says %v (ok %v), the scan %v", seed, step, got, ok, want)
				}
				// Fresh leaves name only the pools without room and not:
				// a stale one (an event or release not marked) costs more.
				if v > 2 {
					t.Fatalf("seed %d step %d: the index checked %d pools, want at most 2", seed, step, v)
				}
				if want.IsDefault() {
					none++
				} else {
					found++
				}
			}
		}
		if found < 50 || none < 50 {
			t.Fatalf("seed %d: %d answers a pool, %d none: too few of one kind to test", seed, found, none)
		}
	}
}

// TestMemIndexDefers: under expandable segments a size does not decide
// room, and the index leaves the question to the scan.
func TestMemIndexDefers(t *testing.T) {
	conf := allocator.DefaultConf()
	conf.ExpandableSegments = true
	a, err := allocator.New(conf, allocator.NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	r := &deviceReplay{a: a, annotate: true, opts: &Options{InferPools: true}}
	p := allocator.PoolID{B: 1}
	if _, err := r.beginPool(p, 0, true); err != nil {
		t.Fatal(err)
	}
	addr, err := a.Malloc(mib, 0)
	a.EndAllocateToPool(p)
	if err != nil {
		t.Fatal(err)
	}
	r.allocated(&trace.Event{Addr: addr}, p)
	if _, ok := r.noRoomMemPool(&trace.Event{Size: mib}, true, allocator.PoolID{}); ok {
		t.Fatal("the index answered under expandable segments")
	}
}

// TestSegIndexMatchesScan: segIndex answers as the list it replaced (the
// first segment added that holds an address; the first added at an
// address taken), with disjoint segments and once two overlap.
func TestSegIndexMatchesScan(t *testing.T) {
	for seed := range int64(10) {
		rng := rand.New(rand.NewSource(seed))
		var x segIndex
		var list []allocator.SegmentInfo
		overlapAt := 1000 + rng.Intn(1000)
		for step := range 3000 {
			addr := uint64(mib * rng.Intn(64))
			switch rng.Intn(3) {
			case 0:
				s := allocator.SegmentInfo{Addr: addr, Size: int64(mib * (1 + rng.Intn(3))), Pool: allocator.PoolID{B: uint64(step + 1)}}
				holds := func(a uint64) bool { _, ok := x.contains(a); return ok }
				if step < overlapAt && (holds(s.Addr) || holds(s.Addr+uint64(s.Size)-1) || holds(s.Addr+mib)) {
					continue // disjoint until overlapAt
				}
				x.add(s)
				list = append(list, s)
			case 1:
				a := addr + uint64(rng.Intn(mib))
				got, gok := x.contains(a)
				var want allocator.PoolID
				wok := false
				for _, s := range list {
					if a >= s.Addr && a < s.Addr+uint64(s.Size) {
						want, wok = s.Pool, true
						break
					}
				}
				if got != want || gok != wok {
					t.Fatalf("seed %d step %d: contains(%#x) %v %v, the scan %v %v", seed, step, a, got, gok, want, wok)
				}
			default:
				got, gok := x.take(addr)
				var want allocator.PoolID
				wok := false
				for i, s := range list {
					if s.Addr == addr {
						want, wok = s.Pool, true
						list = append(list[:i], list[i+1:]...)
						break
					}
				}
				if got != want || gok != wok {
					t.Fatalf("seed %d step %d: take(%#x) %v %v, the scan %v %v", seed, step, addr, got, gok, want, wok)
				}
			}
			if x.Len() != len(list) {
				t.Fatalf("seed %d step %d: %d segments, want %d", seed, step, x.Len(), len(list))
			}
		}
		if !x.flat {
			t.Fatalf("seed %d: no two segments overlapped", seed)
		}
	}
}

// TestSegIndexWork: with n disjoint segments live, an address's segment
// and a release cost O(log n), not a scan of the n (quadratic on
// snapshot-segment-churn, whose segments are all private pools').
func TestSegIndexWork(t *testing.T) {
	const n = 1 << 14
	var x segIndex
	for i := range n {
		x.add(allocator.SegmentInfo{Addr: uint64(i) * 2 * mib, Size: 2 * mib, Pool: allocator.PoolID{B: uint64(i + 1)}})
	}
	bound := 8 * bits.Len(n)
	for i := range n {
		v := x.byAddr.Visits
		if p, ok := x.contains(uint64(i)*2*mib + 512); !ok || p.B != uint64(i+1) {
			t.Fatalf("segment %d: pool %v %v", i, p, ok)
		}
		if p, ok := x.take(uint64(i) * 2 * mib); !ok || p.B != uint64(i+1) {
			t.Fatalf("release %d: pool %v %v", i, p, ok)
		}
		if d := x.byAddr.Visits - v; x.flat || d > bound {
			t.Fatalf("segment %d of %d: %d nodes visited (flat %v), more than %d", i, n, d, x.flat, bound)
		}
	}
}

// TestSegIndexHeap: 100,000 private segments, added in a shuffled order
// (the growth axis's), take at most 72 bytes each (67 with the tree's
// leaves part full): a segment is its range and pool, not a whole
// SegmentInfo with its slice header (126 bytes each).
func TestSegIndexHeap(t *testing.T) {
	const n = 100000
	var x segIndex
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for k := range n {
		i := uint64(k*7919) % n
		x.add(allocator.SegmentInfo{Addr: i << 22, Size: 2 << 20, Pool: allocator.PoolID{A: 1, B: i + 1}})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := int64(after.HeapAlloc) - int64(before.HeapAlloc); got > 72*n {
		t.Errorf("%d segments hold %d bytes, want at most %d", n, got, 72*n)
	}
	if p, ok := x.contains(uint64(n-1)<<22 + 5); !ok || p != (allocator.PoolID{A: 1, B: n}) {
		t.Errorf("contains: %v %v, want pool (1, %d)", p, ok, n)
	}
	runtime.KeepAlive(&x)
}

// TestAllocatedGraphPools: annotating allocations in 10,000 graph pools
// (a CUDA graph a segment) and 3 MemPools, with the snapshot naming them
// all, notes as met only the MemPools, the only pools unmetMemPool asks
// about: no map entry a graph pool.
func TestAllocatedGraphPools(t *testing.T) {
	a, err := allocator.New(allocator.DefaultConf(), allocator.NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	var named []allocator.PoolID
	for i := range uint64(10000) {
		named = append(named, allocator.PoolID{A: 1, B: i + 1})
	}
	named = append(named, allocator.PoolID{B: 1}, allocator.PoolID{B: 2}, allocator.PoolID{B: 3})
	r := &deviceReplay{a: a, annotate: true, opts: &Options{InferPools: true, NamedPools: named}}
	for i, p := range named {
		r.allocated(&trace.Event{Kind: trace.KindAlloc, Addr: uint64(i) << 22, Size: 512, Stream: 7}, p)
	}
	if len(r.pools.met) != 3 {
		t.Errorf("%d pools noted as met, want the 3 MemPools", len(r.pools.met))
	}
	if p, ok := r.unmetMemPool(); ok {
		t.Errorf("unmetMemPool: %v, want none (MemPools 1-3 all met)", p)
	}
}
