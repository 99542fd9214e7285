package analysis

import (
	"cmp"
	"slices"
)

// blockTree orders the live blocks by address: a treap over the slab of
// blocks (node i+1 is slab[i]), each node keeping sums over its subtree, so
// that a range of addresses answers in O(log n) how many blocks of a
// segment it holds and their bytes (after an unmap splits a mapped range)
// and its largest free gap (the largest free block, for grows and OOMs).
type blockTree struct {
	nodes []bnode // parallel to blocks.slab
	root  int32
	seed  uint64
	// visits counts the nodes a method stepped through, for the tests.
	visits int
}

// bnode is a block's place in the tree and the sums over its subtree.
type bnode struct {
	left, right int32 // slab index + 1; 0 none
	prio        uint64
	lo, hi      int64 // least address and greatest end of the subtree
	// gap is the largest free gap between consecutive blocks of the subtree;
	// meaningful only without overlap (ovl: two blocks overlap, which only
	// a corrupt trace makes).
	gap int64
	ovl bool
	// The blocks counted in a segment (block.inSeg): how many, their active
	// and allocated bytes.
	cnt      int32
	act, alc int64
}

// rangeSums are the sums of rangeSum.
type rangeSums struct {
	cnt      int32
	act, alc int64
}

// gapFold walks blocks in address order: best is the largest gap seen,
// cursor the end of the occupied space so far.
type gapFold struct{ best, cursor int64 }

func (f *gapFold) add(lo, hi, gap int64) {
	f.best = max(f.best, lo-f.cursor, gap)
	f.cursor = max(f.cursor, hi)
}

func (t *blockTree) nextPrio() uint64 {
	if t.seed == 0 {
		t.seed = 0x9e3779b97f4a7c15
	}
	t.seed ^= t.seed << 13
	t.seed ^= t.seed >> 7
	t.seed ^= t.seed << 17
	return t.seed
}

// pull recomputes node i's sums from its block and children.
func (t *blocks) pull(i int32) {
	n := &t.tree.nodes[i-1]
	b := t.slab.at(i - 1)
	end := b.addr + b.size
	n.lo, n.hi, n.gap, n.ovl = b.addr, end, 0, false
	n.cnt, n.act, n.alc = 0, 0, 0
	if b.inSeg {
		n.cnt, n.act = 1, b.size
		if !b.pending {
			n.alc = b.size
		}
	}
	if l := n.left; l != 0 {
		c := &t.tree.nodes[l-1]
		n.lo = c.lo
		n.gap = max(c.gap, b.addr-c.hi)
		n.ovl = c.ovl || c.hi > b.addr
		n.hi = max(c.hi, end)
		n.cnt, n.act, n.alc = n.cnt+c.cnt, n.act+c.act, n.alc+c.alc
	}
	if r := n.right; r != 0 {
		c := &t.tree.nodes[r-1]
		n.gap = max(n.gap, c.gap, c.lo-n.hi)
		n.ovl = n.ovl || c.ovl || n.hi > c.lo
		n.hi = max(n.hi, c.hi)
		n.cnt, n.act, n.alc = n.cnt+c.cnt, n.act+c.act, n.alc+c.alc
	}
}

func (t *blocks) key(i int32) int64 { return t.slab.at(i - 1).addr }

// treeInsert links slab node i into the tree.
func (t *blocks) treeInsert(i int32) {
	if int(i) > len(t.tree.nodes) {
		t.growNodes()
	}
	t.tree.nodes[i-1] = bnode{prio: t.tree.nextPrio()}
	t.tree.root = t.insertAt(t.tree.root, i)
}

// bulkSync is the fewest fresh blocks for which sync builds an empty tree
// in one pass (build) rather than by an insert each.
const bulkSync = 1024

// build makes the tree, empty so far, of the fresh blocks that are live:
// sorted by address (ties in the order they came, where an insert puts
// an equal key), then linked in one pass over a stack of the right spine,
// each node's sums pulled once its subtree is whole. Its priorities are
// drawn in the order inserts would draw them, so the tree is the one the
// inserts would make; a sync of every block of a large trace (the first
// query of the largest free block) costs a sort instead of a walk from
// the root, with a cache miss a level, per block.
func (t *blocks) build() {
	type ent struct {
		addr int64
		pos  int32 // in fresh, for ties
		i    int32 // slab index + 1
	}
	ents := make([]ent, 0, len(t.fresh))
	for k, i := range t.fresh {
		if b := t.slab.at(i); b.live && !b.indexed {
			b.indexed = true
			ents = append(ents, ent{b.addr, int32(k), i + 1})
		}
	}
	t.fresh = t.fresh[:0]
	if len(ents) == 0 {
		return
	}
	if len(t.tree.nodes) < t.slab.len() {
		t.growNodes()
	}
	for _, e := range ents {
		t.tree.nodes[e.i-1] = bnode{prio: t.tree.nextPrio()}
	}
	slices.SortFunc(ents, func(a, b ent) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	t.tree.visits += len(ents)
	stack := make([]int32, 0, 64)
	for _, e := range ents {
		last := int32(0)
		p := t.tree.nodes[e.i-1].prio
		for len(stack) > 0 && t.tree.nodes[stack[len(stack)-1]-1].prio < p {
			last = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			t.pull(last)
		}
		t.tree.nodes[e.i-1].left = last
		if len(stack) > 0 {
			t.tree.nodes[stack[len(stack)-1]-1].right = e.i
		}
		stack = append(stack, e.i)
	}
	for k := len(stack) - 1; k >= 0; k-- {
		t.pull(stack[k])
	}
	t.tree.root = stack[0]
}

// growNodes makes the nodes as many as the slab's blocks, in an array as
// large as the slab's: grown one node at a time, by append, a sync of a
// million fresh blocks copied the array about ten times over, most of its
// time.
func (t *blocks) growNodes() {
	nodes := make([]bnode, t.slab.len(), t.slab.capacity())
	copy(nodes, t.tree.nodes)
	t.tree.nodes = nodes
}

func (t *blocks) insertAt(root, i int32) int32 {
	t.tree.visits++
	if root == 0 {
		t.pull(i)
		return i
	}
	r := &t.tree.nodes[root-1]
	if t.tree.nodes[i-1].prio > r.prio {
		l, h := t.split(root, t.key(i))
		n := &t.tree.nodes[i-1]
		n.left, n.right = l, h
		t.pull(i)
		return i
	}
	if t.key(i) < t.key(root) {
		l := t.insertAt(r.left, i)
		t.tree.nodes[root-1].left = l
	} else {
		h := t.insertAt(r.right, i)
		t.tree.nodes[root-1].right = h
	}
	t.pull(root)
	return root
}

// split divides the subtree at root into the blocks below addr and the rest.
func (t *blocks) split(root int32, addr int64) (lo, hi int32) {
	if root == 0 {
		return 0, 0
	}
	t.tree.visits++
	n := &t.tree.nodes[root-1]
	if t.key(root) < addr {
		r, h := t.split(n.right, addr)
		t.tree.nodes[root-1].right = r
		t.pull(root)
		return root, h
	}
	l, r := t.split(n.left, addr)
	t.tree.nodes[root-1].left = r
	t.pull(root)
	return l, root
}

func (t *blocks) merge(a, b int32) int32 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	t.tree.visits++
	if t.tree.nodes[a-1].prio > t.tree.nodes[b-1].prio {
		t.tree.nodes[a-1].right = t.merge(t.tree.nodes[a-1].right, b)
		t.pull(a)
		return a
	}
	t.tree.nodes[b-1].left = t.merge(a, t.tree.nodes[b-1].left)
	t.pull(b)
	return b
}

// treeRemove unlinks the node of addr.
func (t *blocks) treeRemove(addr int64) { t.tree.root = t.removeAt(t.tree.root, addr) }

func (t *blocks) removeAt(root int32, addr int64) int32 {
	if root == 0 {
		return 0
	}
	t.tree.visits++
	n := &t.tree.nodes[root-1]
	switch k := t.key(root); {
	case addr < k:
		n.left = t.removeAt(n.left, addr)
	case addr > k:
		n.right = t.removeAt(n.right, addr)
	default:
		return t.merge(n.left, n.right)
	}
	t.pull(root)
	return root
}

// changed recomputes the sums on the path to b, after its pending or inSeg
// changed (nothing to do while b is not in the tree).
func (t *blocks) changed(b *block) {
	if b.indexed {
		t.changedAt(t.tree.root, b.addr)
	}
}

func (t *blocks) changedAt(root int32, addr int64) {
	if root == 0 {
		return
	}
	t.tree.visits++
	n := &t.tree.nodes[root-1]
	switch k := t.key(root); {
	case addr < k:
		t.changedAt(n.left, addr)
	case addr > k:
		t.changedAt(n.right, addr)
	}
	t.pull(root)
}

// overlapping reports whether two live blocks overlap (a corrupt trace).
func (t *blocks) overlapping() bool {
	t.sync()
	return t.tree.root != 0 && t.tree.nodes[t.tree.root-1].ovl
}

// before returns the block with the greatest address below addr, or nil.
func (t *blocks) before(addr int64) *block {
	t.sync()
	var best int32
	for i := t.tree.root; i != 0; {
		t.tree.visits++
		if t.key(i) < addr {
			best, i = i, t.tree.nodes[i-1].right
		} else {
			i = t.tree.nodes[i-1].left
		}
	}
	if best == 0 {
		return nil
	}
	return t.slab.at(best - 1)
}

// visit calls node for each block and sub for each whole subtree whose
// addresses lie in [lo, hi), in address order, through O(log n) nodes.
func (t *blocks) visit(lo, hi int64, node func(i int32), sub func(n *bnode)) {
	t.sync()
	// walk visits subtree i; checkLo and checkHi say whether its keys must
	// still be checked against the lower and the upper bound.
	var walk func(i int32, checkLo, checkHi bool)
	walk = func(i int32, checkLo, checkHi bool) {
		if i == 0 {
			return
		}
		t.tree.visits++
		n := &t.tree.nodes[i-1]
		if !checkLo && !checkHi {
			sub(n)
			return
		}
		k := t.key(i)
		if checkLo && k < lo {
			walk(n.right, checkLo, checkHi)
			return
		}
		if checkHi && k >= hi {
			walk(n.left, checkLo, checkHi)
			return
		}
		walk(n.left, checkLo, false)
		node(i)
		walk(n.right, false, checkHi)
	}
	walk(t.tree.root, true, true)
}

// rangeSum sums the segment-counted blocks with addresses in [lo, hi).
func (t *blocks) rangeSum(lo, hi int64) rangeSums {
	var s rangeSums
	t.visit(lo, hi, func(i int32) {
		if b := t.slab.at(i - 1); b.inSeg {
			s.cnt++
			s.act += b.size
			if !b.pending {
				s.alc += b.size
			}
		}
	}, func(n *bnode) {
		s.cnt += n.cnt
		s.act += n.act
		s.alc += n.alc
	})
	return s
}

// foldGaps folds the blocks with addresses in [lo, hi) into f.
func (t *blocks) foldGaps(lo, hi int64, f *gapFold) {
	t.visit(lo, hi, func(i int32) {
		b := t.slab.at(i - 1)
		f.add(b.addr, b.addr+b.size, 0)
	}, func(n *bnode) {
		f.add(n.lo, n.hi, n.gap)
	})
}

// inRange calls fn for each block with an address in [lo, hi), in order:
// O(log n) plus the blocks found.
func (t *blocks) inRange(lo, hi int64, fn func(b *block)) {
	t.sync()
	var walk func(i int32)
	walk = func(i int32) {
		if i == 0 {
			return
		}
		t.tree.visits++
		n := &t.tree.nodes[i-1]
		k := t.key(i)
		if k >= lo {
			walk(n.left)
		}
		if k >= lo && k < hi {
			fn(t.slab.at(i - 1))
		}
		if k < hi {
			walk(n.right)
		}
	}
	walk(t.tree.root)
}
