package analysis

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/tracer-dev/tracer/internal/grow"
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
		bs.put(block{addr: int64(0x7f0000000000 + 512*i), size: 512}, blockInfo{}, 0)
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
		bs.put(block{addr: int64(0x7f0000000000 + 512*i), size: 512}, blockInfo{}, 0)
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

// TestSlabChunks: a slab of n blocks allocates its chunks and their table,
// about n blocks of memory, where one array doubled up to n blocks
// allocates about 2n and copies n.
func TestSlabChunks(t *testing.T) {
	const n = 300_000
	var s slab[block]
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		s.at(s.push()).addr = int64(512 * i)
	}
	runtime.ReadMemStats(&after)
	final := int64(s.capacity()) * int64(unsafe.Sizeof(block{}))
	if got := int64(after.TotalAlloc - before.TotalAlloc); got > final*11/10 {
		t.Errorf("%d blocks: %d MB allocated for a slab of %d MB, want at most 1.1 times", n, got>>20, final>>20)
	}
	for _, i := range []int32{0, slabChunk - 1, slabChunk, n - 1} {
		if got := s.at(i).addr; got != 512*int64(i) {
			t.Errorf("block %d has address %d, want %d", i, got, 512*i)
		}
	}
}

// TestReservedInfos: a numbered table reserved for n blocks outside the
// heap holds their infos there too, beside the blocks: putting n blocks
// allocates nothing on the heap, where the infos grown a chunk at a time
// there took 24 bytes a block, each chunk's pages first touched (faulted
// in) on the analysis's thread.
func TestReservedInfos(t *testing.T) {
	const n = 200_000
	var h grow.OffHeap
	defer h.Release()
	bs := blocks{numbered: true, full: true}
	bs.reserve(n, &h)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		bs.put(block{addr: int64(0x7f0000000000 + 512*i), size: 512}, blockInfo{allocN: int64(i)}, int32(i+1))
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Errorf("%d blocks put into a table reserved for them: %d KiB allocated on the heap, want none", n, got>>10)
	}
	if got := bs.info(bs.slab.at(n - 1)).allocN; got != n-1 {
		t.Errorf("block %d's info has allocN %d", n, got)
	}
}
