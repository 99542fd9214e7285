package allocator

import (
	"runtime"
	"testing"
)

// TestPendingHeap counts the heap the cross-stream path takes a pending
// block (record_stream on two other streams, then free): its tables by block
// id allocate ~51 bytes a block as they grow (maps keyed by block id: ~80)
// and hold ~20, and a run that keeps reusing block ids allocates nothing
// (the maps: a stream list a block).
func TestPendingHeap(t *testing.T) {
	const n = 1 << 17
	a, err := New(DefaultConf(), NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	addrs, hs := make([]uint64, n), make([]Handle, n)
	for i := range addrs {
		if addrs[i], hs[i], err = a.MallocHandle(512, 0); err != nil {
			t.Fatal(err)
		}
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for i, x := range addrs {
		for s := uint64(1); s <= 2; s++ {
			if err := a.RecordStreamHandle(x, hs[i], s); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.FreeHandle(x, hs[i]); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	held := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
	made := float64(m1.TotalAlloc-m0.TotalAlloc) / n
	t.Logf("a pending block: %.1f bytes held, %.1f allocated", held, made)
	if held > 32 || made > 64 {
		t.Errorf("a pending block holds %.1f bytes and allocated %.1f, want at most 32 and 64", held, made)
	}
	runtime.KeepAlive(a)

	// Then blocks go through the cycle with about n pending at once,
	// their ids taken from the arena's free list: no allocation.
	for i := range addrs {
		if err := a.CompleteFreeHandle(addrs[i], hs[i]); err != nil {
			t.Fatal(err)
		}
	}
	ring := make([]uint64, 0, 1024)
	rh := make([]Handle, 0, 1024)
	for range 1024 {
		x, h, err := a.MallocHandle(512, 0)
		if err != nil {
			t.Fatal(err)
		}
		_ = a.RecordStreamHandle(x, h, 1)
		_ = a.FreeHandle(x, h)
		ring, rh = append(ring, x), append(rh, h)
	}
	k := 0
	allocs := testing.AllocsPerRun(4096, func() {
		if err := a.CompleteFreeHandle(ring[k], rh[k]); err != nil {
			t.Fatal(err)
		}
		x, h, err := a.MallocHandle(512, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.RecordStreamHandle(x, h, 1+uint64(k%3)); err != nil {
			t.Fatal(err)
		}
		if err := a.FreeHandle(x, h); err != nil {
			t.Fatal(err)
		}
		ring[k], rh[k] = x, h
		k = (k + 1) % len(ring)
	})
	if allocs != 0 {
		t.Errorf("a pending block's cycle made %v allocations, want 0", allocs)
	}
}
