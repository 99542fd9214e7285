package analysis

import "github.com/tracer-dev/tracer/trace"

// block is a live (allocated or pending-free) block.
type block struct {
	addr      int64
	size, req int64 // block bytes and requested bytes
	allocN    int64 // event index of the alloc
	allocT    int64 // its TimeUs
	stack     trace.StackID
	phase     int32 // the phase of its alloc (phases), 0 without annotations
	pending   bool  // free_requested seen, free_completed not yet
	recon     bool  // existed before the trace began
	// inSeg: the block is counted in the segment that holds its address
	// (one did at its alloc, and has not been freed since).
	inSeg bool
	// misfit: the block is not wholly inside the segment counting it.
	misfit bool
	live   bool // the slab entry holds a live block
	// indexed: the block is in the address tree; blocks enter it when a
	// query needs it (blocks.sync), so most short-lived ones never do.
	indexed bool
}

// site is the stack b counts under among the allocation sites: its own,
// or, for a block live before the recording began, which has none,
// BeforeRecording.
func (b *block) site() trace.StackID {
	if b.recon && b.stack == trace.NoStack {
		return BeforeRecording
	}
	return b.stack
}

// blocks maps addresses to live blocks. It is an open-addressing hash table
// with linear probing over a slab of blocks: every alloc and free looks a
// block up, and this is several times faster than a Go map of pointers, with
// no allocation once the slab has grown to the live set. The blocks are
// also ordered by address in tree (blocktree.go).
type blocks struct {
	slots []int32 // 0 empty, else slab index + 1
	slab  []block
	free  []int32 // unused slab indexes
	n     int
	shift uint
	tree  blockTree
	fresh []int32 // slab indexes of blocks put since the last sync
}

func (t *blocks) hash(addr int64) int {
	// Addresses are 512-byte aligned; Fibonacci hashing mixes the rest.
	return int((uint64(addr) * 0x9e3779b97f4a7c15) >> t.shift)
}

// get returns the block at addr, or nil. The pointer is valid until the next put.
func (t *blocks) get(addr int64) *block {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for h := t.hash(addr); ; h = (h + 1) & mask {
		s := t.slots[h]
		if s == 0 {
			return nil
		}
		if b := &t.slab[s-1]; b.addr == addr {
			return b
		}
	}
}

// put stores a new block (its addr must not be present) and returns it.
func (t *blocks) put(b block) *block {
	if 2*(t.n+1) > len(t.slots) {
		t.rehash(max(64, 2*len(t.slots)))
	}
	b.live, b.indexed = true, false
	var i int32
	if k := len(t.free); k > 0 {
		i = t.free[k-1]
		t.free = t.free[:k-1]
		t.slab[i] = b
	} else {
		i = int32(len(t.slab))
		t.slab = append(t.slab, b)
	}
	t.insert(b.addr, i+1)
	if len(t.fresh) > 2*t.n+64 {
		t.compactFresh()
	}
	t.fresh = append(t.fresh, i)
	t.n++
	return &t.slab[i]
}

func (t *blocks) insert(addr int64, s int32) {
	mask := len(t.slots) - 1
	h := t.hash(addr)
	for t.slots[h] != 0 {
		h = (h + 1) & mask
	}
	t.slots[h] = s
}

func (t *blocks) rehash(n int) {
	old := t.slots
	t.slots = make([]int32, n)
	t.shift = 64
	for m := n; m > 1; m >>= 1 {
		t.shift--
	}
	for _, s := range old {
		if s != 0 {
			t.insert(t.slab[s-1].addr, s)
		}
	}
}

// del removes the block at addr, shifting later entries of its probe run
// back so lookups never need tombstones.
func (t *blocks) del(addr int64) {
	mask := len(t.slots) - 1
	h := t.hash(addr)
	for {
		s := t.slots[h]
		if s == 0 {
			return
		}
		if b := &t.slab[s-1]; b.addr == addr {
			if b.indexed {
				t.treeRemove(addr)
			}
			b.live, b.indexed = false, false
			t.free = append(t.free, s-1)
			break
		}
		h = (h + 1) & mask
	}
	t.n--
	// Backward-shift deletion.
	i := h
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		home := t.hash(t.slab[t.slots[j]-1].addr)
		// Move j into the hole at i if its home is not in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
}

// each calls fn for every live block.
func (t *blocks) each(fn func(b *block)) {
	t.tree.visits += len(t.slots)
	for _, s := range t.slots {
		if s != 0 {
			fn(&t.slab[s-1])
		}
	}
}

// sync puts the blocks that are live and not yet in the address tree into
// it: each block at most once, O(log n), and only when a query needs the
// order (the largest free block, an unmap, a segment freed under blocks).
func (t *blocks) sync() {
	for _, i := range t.fresh {
		if b := &t.slab[i]; b.live && !b.indexed {
			b.indexed = true
			t.treeInsert(i + 1)
		}
	}
	t.fresh = t.fresh[:0]
}

// compactFresh drops from fresh the blocks freed since (and the repeats of
// a reused slab entry), so that it stays within the live blocks.
func (t *blocks) compactFresh() {
	out := t.fresh[:0]
	for _, i := range t.fresh {
		if b := &t.slab[i]; b.live && !b.indexed {
			b.indexed = true // marks it kept
			out = append(out, i)
		}
	}
	for _, i := range out {
		t.slab[i].indexed = false
	}
	t.fresh = out
}
