package allocator

import (
	"runtime"
	"testing"
)

// TestEmptyCachePoolWork: an empty_cache looks at the freeable private
// pools alone (graph_pools_freeable), not at every pool made so far: a
// replay that keeps one pool in use per CUDA graph and calls empty_cache
// at each capture's start once paid for all the pools at every call.
func TestEmptyCachePoolWork(t *testing.T) {
	a, err := New(DefaultConf(), NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	const n = 4096
	addrs := make([]uint64, n)
	for i := range n {
		id := PoolID{A: 1, B: uint64(i + 1)}
		before := poolWork
		if err := a.EmptyCache(); err != nil {
			t.Fatal(err)
		}
		if d := poolWork - before; d != 0 {
			t.Fatalf("empty_cache with %d pools in use looked at %d pools, want 0", i, d)
		}
		a.BeginAllocateToPool(id, nil)
		if addrs[i], err = a.Malloc(512, 0); err != nil {
			t.Fatal(err)
		}
		a.EndAllocateToPool(id)
	}
	// Free the blocks of three pools and release them: the next
	// empty_cache returns their segments and looks at those three alone.
	for _, i := range []int{7, 100, 4000} {
		if err := a.Free(addrs[i]); err != nil {
			t.Fatal(err)
		}
		a.ReleasePool(PoolID{A: 1, B: uint64(i + 1)})
	}
	reserved := a.Stats().ReservedBytes[0].Current
	before := poolWork
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if d := poolWork - before; d != 3 {
		t.Fatalf("empty_cache with 3 freeable pools of %d looked at %d pools, want 3", n, d)
	}
	if got, want := reserved-a.Stats().ReservedBytes[0].Current, int64(3*2<<20); got != want {
		t.Fatalf("empty_cache released %d bytes, want %d (the three freeable pools' segments)", got, want)
	}
	for _, i := range []int{7, 100, 4000} {
		if a.InUse(PoolID{A: 1, B: uint64(i + 1)}) {
			t.Fatalf("pool %d in use after its release", i)
		}
	}
	// A pool's own empty_cache looks at that pool only.
	before = poolWork
	if err := a.EmptyPoolCache(PoolID{A: 1, B: 1}); err != nil {
		t.Fatal(err)
	}
	if d := poolWork - before; d != 0 {
		t.Fatalf("empty_cache of a pool in use looked at %d pools, want 0", d)
	}
}

// TestDeletedPoolsReused: a private pool that empty_cache deletes leaves
// its pair of block pools (their free sets' headers) for the next pool
// made, so that a run making and deleting a pool per step holds as many
// as it has alive at once, not one pair per pool ever made.
func TestDeletedPoolsReused(t *testing.T) {
	a, err := New(DefaultConf(), NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	for i := range n {
		// Two pools alive at once, the older one deleted at each step.
		id := PoolID{A: 1, B: uint64(i + 1)}
		a.BeginAllocateToPool(id, nil)
		size := int64(512 + i%3*(4<<20))
		addr, err := a.Malloc(size, 0)
		if err != nil {
			t.Fatal(err)
		}
		a.EndAllocateToPool(id)
		if err := a.Free(addr); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			a.ReleasePool(PoolID{A: 1, B: uint64(i)})
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if a.InUse(PoolID{A: 1, B: uint64(i)}) {
				t.Fatalf("pool %d in use after its release and empty_cache", i)
			}
		}
		if !a.Fits(id, size, 0) {
			t.Fatalf("pool %d: its freed block does not fit a request of its size", i+1)
		}
		if i%1000 == 0 {
			if err := a.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := len(a.pools); got > 2+2*2 {
		t.Fatalf("%d block pools after %d private pools made and deleted two at a time, want at most 6", got, n)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestHeapPerPrivatePool makes 20,000 private pools, each serving one small
// request from a segment of its own that is then freed (a CUDA graph's
// pool kept alive): each holds the block pool of the class it served, with
// no unmapped set, and the live heap grows by at most 1.5 KB a pool (1.3
// KB). It grew by 2.7 KB when every private pool made both its block
// pools, each with its unmapped set (mostly pointer slots, which every
// collection scans).
func TestHeapPerPrivatePool(t *testing.T) {
	a, err := New(DefaultConf(), NewSimDevice(1<<50))
	if err != nil {
		t.Fatal(err)
	}
	live := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 20_000
	// The allocator's arrays and maps, grown to n pools' worth and emptied
	// again, are not the pools' headers.
	pools := func(from int) { onePerPool(t, a, from, n) }
	pools(1)
	for i := range n {
		a.ReleasePool(PoolID{A: 1, B: uint64(1 + i)})
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	a.deadPools, a.deadPrivates = nil, nil
	before := live()
	pools(1 + n)
	per := float64(live()-before) / n
	runtime.KeepAlive(a)
	for _, pp := range a.private {
		if pp.large != nil || pp.small == nil || pp.small.unmapped != nil {
			t.Fatalf("pool %v: small %v, large %v: want the small block pool alone, with no unmapped set",
				pp.id, pp.small != nil, pp.large != nil)
		}
	}
	if per > 1536 {
		t.Errorf("%.0f bytes of live heap per private pool, want at most 1536", per)
	}
	t.Logf("%.0f bytes of live heap per private pool", per)
}

// TestPrivatePoolObjects: private pools, their block pools and their
// size-class pages are made in bulk, so that the heap objects the runtime
// allocates and the collector finds per private pool fall as pools grow in
// number, and the bytes per pool stay the same: at 4,000 and 32,000 pools
// of one small block each, at most 0.25 objects a pool (2.3 when each pool
// and block pool was an object of its own and pages came seven a slab).
func TestPrivatePoolObjects(t *testing.T) {
	per := func(n int) (objects, bytes float64) {
		a, err := New(DefaultConf(), NewSimDevice(1<<50))
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		onePerPool(t, a, 1, n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(a)
		return float64(after.Mallocs-before.Mallocs) / float64(n), float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	}
	o1, b1 := per(4_000)
	o2, b2 := per(32_000)
	t.Logf("objects per pool %.2f and %.2f, bytes %.0f and %.0f", o1, o2, b1, b2)
	if o1 > 0.25 || o2 > 0.25 {
		t.Errorf("%.2f and %.2f heap objects made per private pool at 4,000 and 32,000 pools, want at most 0.25", o1, o2)
	}
	if b2 > 1.1*b1 {
		t.Errorf("%.0f bytes of live heap per private pool at 32,000 pools, %.0f at 4,000: want no more than 10%% more", b2, b1)
	}
}

// onePerPool makes private pools (1, from) to (1, from+n-1) in a, each with
// a 512-byte block allocated and freed.
func onePerPool(t *testing.T, a *Allocator, from, n int) {
	t.Helper()
	for i := range n {
		id := PoolID{A: 1, B: uint64(from + i)}
		a.BeginAllocateToPool(id, nil)
		addr, err := a.Malloc(512, 0)
		if err != nil {
			t.Fatal(err)
		}
		a.EndAllocateToPool(id)
		if err := a.Free(addr); err != nil {
			t.Fatal(err)
		}
	}
}
