package allocator

import "testing"

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
