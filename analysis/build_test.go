package analysis

import (
	"slices"
	"testing"
)

// TestSyncBuild: the first sync of many blocks builds the address tree in
// one pass: the tree is the one inserting them one at a time makes (same
// links, same sums), and it visits each block about once, where the
// inserts walk from the root for each.
func TestSyncBuild(t *testing.T) {
	const n = 100_000
	fill := func(bs *blocks) {
		x := uint64(0x9e3779b97f4a7c15)
		for i := range n {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			// Distinct addresses in no order, some blocks freed again.
			bs.put(block{addr: int64(i)<<20 | int64(x%1024)<<9, size: 512, inSeg: i%3 != 0, pending: i%5 == 0}, blockInfo{}, 0)
			if i%7 == 0 {
				bs.del(int64(i)<<20 | int64(x%1024)<<9)
			}
		}
	}
	var built, inserted blocks
	fill(&built)
	fill(&inserted)
	built.sync()
	// The same blocks, one insert each (what sync does for a tree not empty).
	inserted.ordered = true
	inserted.listLive()
	for _, i := range inserted.fresh {
		if b := inserted.slab.at(i); b.live && !b.indexed {
			b.indexed = true
			inserted.treeInsert(i + 1)
		}
	}
	inserted.fresh = inserted.fresh[:0]
	if built.tree.root != inserted.tree.root {
		t.Fatalf("root %d, inserts make %d", built.tree.root, inserted.tree.root)
	}
	live := inserted.slab.len()
	if !slices.Equal(built.tree.nodes[:live], inserted.tree.nodes[:live]) {
		t.Fatal("the built tree's nodes differ from the inserted tree's")
	}
	if v := built.tree.visits; v > 2*n {
		t.Errorf("sync of %d blocks visited %d nodes, want at most %d", n, v, 2*n)
	}
	if inserted.tree.visits <= 2*n {
		t.Errorf("the inserts visited only %d nodes: the test's count shows nothing", inserted.tree.visits)
	}
}
