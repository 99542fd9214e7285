package analysis

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestSlabGrowth: putting n live blocks allocates about twice the final
// slab and fresh list (they double), not the five times that growing by
// quarters (append's rate for large slices) allocates, every old array of
// which stays resident until the runtime gives it back.
func TestSlabGrowth(t *testing.T) {
	const n = 200_000
	var bs blocks
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		bs.put(block{addr: int64(0x7f0000000000 + 512*i), size: 512})
	}
	runtime.ReadMemStats(&after)
	final := int64(bs.slab.capacity())*int64(unsafe.Sizeof(block{})) + int64(cap(bs.fresh))*4 + int64(len(bs.slots))*int64(unsafe.Sizeof(slot(0)))
	got := int64(after.TotalAlloc - before.TotalAlloc)
	if got > 5*final/2 {
		t.Errorf("%d blocks: %d MB allocated for a slab, fresh list and table of %d MB, want at most 2.5 times", n, got>>20, final>>20)
	}
}

// TestNodesGrowth: the first query that needs the address order puts every
// live block into the tree at once; its nodes are allocated about once
// (growNodes), not grown by append a node at a time, which copied the
// array several times over and left each old one behind.
func TestNodesGrowth(t *testing.T) {
	const n = 200_000
	var bs blocks
	for i := range n {
		bs.put(block{addr: int64(0x7f0000000000 + 512*i), size: 512})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if bs.overlapping() {
		t.Fatal("blocks 512 bytes apart overlap")
	}
	runtime.ReadMemStats(&after)
	final := int64(cap(bs.tree.nodes)) * int64(unsafe.Sizeof(bnode{}))
	if got := int64(after.TotalAlloc - before.TotalAlloc); got > 3*final/2 {
		t.Errorf("%d blocks synced: %d MB allocated for nodes of %d MB, want at most 1.5 times", n, got>>20, final>>20)
	}
}
