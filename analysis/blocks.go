package analysis

import (
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// block is a live (allocated or pending-free) block: what every summary
// keeps of it, 40 bytes; blockInfo holds the rest.
type block struct {
	addr      int64
	size, req int64 // block bytes and requested bytes
	at        int32 // its slab index, which is its blockInfo's
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

// blockInfo is what only a full summary keeps of a live block (not
// Options.FragmentationOnly), in a slab of its own beside the blocks':
// a summary of the fragmentation alone makes and touches 40 bytes a block
// where it made 56.
type blockInfo struct {
	allocN int64 // event index of the alloc
	allocT int64 // its TimeUs
	stack  trace.StackID
	phase  int32 // the phase of its alloc (phases), 0 without annotations
}

// info returns b's blockInfo, or nil where the table keeps none.
func (t *blocks) info(b *block) *blockInfo {
	if !t.full {
		return nil
	}
	return t.infos.at(b.at)
}

// site is the stack b counts under among the allocation sites: its own,
// or, for a block live before the recording began, which has none,
// BeforeRecording. A table that keeps no blockInfo knows no stack.
func (t *blocks) site(b *block) trace.StackID {
	stack := trace.NoStack
	if t.full {
		stack = t.infos.at(b.at).stack
	}
	if b.recon && stack == trace.NoStack {
		return BeforeRecording
	}
	return stack
}

// blocks maps addresses to live blocks. It is an open-addressing hash table
// with linear probing over a slab of blocks: every alloc and free looks a
// block up, and this is several times faster than a Go map of pointers, with
// no allocation once the slab has grown to the live set. The blocks are
// also ordered by address in tree (blocktree.go).
//
// A slot holds a tag of its block's address beside the slab index, so that
// a probe passes the other blocks of its run without reading their slab
// entries: in a table larger than the cache each such read is a miss.
//
// Where the events number their blocks (Options.Numbered), the table is
// not used: block number n lives at slab index n-1, found by its number
// (byNumber), and a free's block is one array access.
type blocks struct {
	numbered bool
	full     bool   // infos holds each block's blockInfo
	slots    []slot // 0 empty, else tagOf(addr)<<32 | slab index + 1
	slab     slab[block]
	infos    slab[blockInfo]
	free     []int32 // unused slab indexes
	n        int
	shift    uint
	tree     blockTree
	fresh    []int32 // slab indexes of blocks put since the last sync
	ordered  bool    // a sync has been: put lists new blocks in fresh
	// lookups counts the hash table's gets, peeks, inserts and deletes,
	// for the tests.
	lookups int
}

// slot is a table entry: the address tag in the high half, the slab index
// + 1 in the low half (0: empty).
type slot uint64

func (s slot) index() int32 { return int32(uint32(s)) - 1 }

// tagOf is the part of addr a slot keeps, in the slot's high half: the
// address bits above the 512-byte alignment, folded to 32 bits, which
// tell apart any two blocks less than 2 TiB apart. Equal tags are rare,
// and get and del then compare whole addresses. The hash is the tag's, so
// that a deletion's backward shift and a rehash find a slot's home from
// the slot alone.
func tagOf(addr int64) slot {
	a := uint64(addr)
	return slot(uint32(a>>9)^uint32(a>>41)) << 32
}

// hash is the home slot of the blocks with tag tag (tagOf's, or a slot's
// high half).
func (t *blocks) hash(tag slot) int {
	// Fibonacci hashing mixes the tag's bits into the top ones.
	return int((uint64(tag>>32) * 0x9e3779b97f4a7c15) >> t.shift)
}

// get returns the block at addr, or nil. The pointer is valid until the next put.
func (t *blocks) get(addr int64) *block {
	t.lookups++
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	tag := tagOf(addr)
	for h := t.hash(tag); ; h = (h + 1) & mask {
		s := t.slots[h]
		if s == 0 {
			return nil
		}
		if s&^0xffffffff == tag {
			if b := t.slab.at(s.index()); b.addr == addr {
				return b
			}
		}
	}
}

// peek loads addr's home slot (nothing when the table is empty) and returns
// it: a caller that peeks at the addresses of its next few events in one
// loop has their cache misses overlap, where the events' own lookups, one
// after another, would take them in turn.
func (t *blocks) peek(addr int64) slot {
	t.lookups++
	if t.n == 0 {
		return 0
	}
	return t.slots[t.hash(tagOf(addr))&(len(t.slots)-1)]
}

// byNumber returns the live block numbered num at addr, or nil (numbered
// tables only). The pointer is valid until the next put.
func (t *blocks) byNumber(addr int64, num int32) *block {
	if num <= 0 || int(num) > t.slab.len() {
		return nil
	}
	if b := t.slab.at(num - 1); b.live && b.addr == addr {
		return b
	}
	return nil
}

// put stores a new block (its addr must not be present) with its info, if
// the table keeps it, and returns it. A numbered table keeps it at number
// num (> 0, not live), a hashed one ignores num.
func (t *blocks) put(b block, info blockInfo, num int32) *block {
	b.live, b.indexed = true, false
	var i int32
	if t.numbered {
		i = num - 1
		t.slab.reach(i)
	} else {
		if 2*(t.n+1) > len(t.slots) {
			t.rehash(max(64, 2*len(t.slots)))
		}
		if k := len(t.free); k > 0 {
			i = t.free[k-1]
			t.free = t.free[:k-1]
		} else {
			i = t.slab.push()
		}
	}
	b.at = i
	*t.slab.at(i) = b
	if t.full {
		t.infos.reach(i)
		*t.infos.at(i) = info
	}
	if !t.numbered {
		t.insert(tagOf(b.addr) | slot(i+1))
	}
	t.n++
	if !t.ordered {
		return t.slab.at(i)
	}
	if len(t.fresh) > 2*t.n+64 {
		t.compactFresh()
	}
	if len(t.fresh) == cap(t.fresh) {
		t.fresh = grow.Double(t.fresh, 0)
	}
	t.fresh = append(t.fresh, i)
	return t.slab.at(i)
}

// insert puts s, a slot of a block not in the table, into it.
func (t *blocks) insert(s slot) {
	t.lookups++
	mask := len(t.slots) - 1
	h := t.hash(s)
	for t.slots[h] != 0 {
		h = (h + 1) & mask
	}
	t.slots[h] = s
}

func (t *blocks) rehash(n int) {
	old := t.slots
	t.slots = grow.Make[slot](n, n) // huge pages, before the rehash touches it
	t.shift = 64
	for m := n; m > 1; m >>= 1 {
		t.shift--
	}
	for _, s := range old {
		if s != 0 {
			t.insert(s)
		}
	}
}

// reserve makes the empty table the size that n blocks grow it to (none
// for n <= 0), so that they are put without a rehash; a numbered table,
// which has none, makes its slab's chunks for them (slab.reserve, in h if
// not nil), and its infos' where it keeps them: grown a chunk at a time
// on the heap, they were most of the analysis's page faults.
func (t *blocks) reserve(n int, h *grow.OffHeap) {
	if n <= 0 || t.n > 0 {
		return
	}
	if t.numbered {
		t.slab.reserve(n, h)
		if t.full {
			t.infos.reserve(n, h)
		}
		return
	}
	size := 64
	for 2*n > size {
		size *= 2
	}
	t.rehash(size)
}

// remove removes the live block b.
func (t *blocks) remove(b *block) {
	if !t.numbered {
		t.del(b.addr)
		return
	}
	if b.indexed {
		t.treeRemove(b.addr)
	}
	b.live, b.indexed = false, false
	t.n--
}

// del removes the block at addr from a hashed table, shifting later
// entries of its probe run back so lookups never need tombstones.
func (t *blocks) del(addr int64) {
	t.lookups++
	mask := len(t.slots) - 1
	tag := tagOf(addr)
	h := t.hash(tag)
	for {
		s := t.slots[h]
		if s == 0 {
			return
		}
		if s&^0xffffffff == tag {
			if b := t.slab.at(s.index()); b.addr == addr {
				if b.indexed {
					t.treeRemove(addr)
				}
				b.live, b.indexed = false, false
				t.free = append(t.free, s.index())
				break
			}
		}
		h = (h + 1) & mask
	}
	t.n--
	// Backward-shift deletion.
	i := h
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		home := t.hash(t.slots[j])
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
	if t.numbered {
		t.tree.visits += t.slab.len()
		for i := range int32(t.slab.len()) {
			if b := t.slab.at(i); b.live {
				fn(b)
			}
		}
		return
	}
	t.tree.visits += len(t.slots)
	for _, s := range t.slots {
		if s != 0 {
			fn(t.slab.at(s.index()))
		}
	}
}

// sync puts the blocks that are live and not yet in the address tree into
// it: each block at most once, O(log n), and only when a query needs the
// order (the largest free block, an unmap, a segment freed under blocks).
//
// Until the first sync no block is in the tree and none is listed in
// fresh: that sync lists every live block, by a sweep of the table (or
// of the slab, numbered), and from then on put lists each new one. A
// replay that never asks for the order (a recorded one, mostly) keeps no
// list, up to 8 bytes a live block where the list grows to twice them.
func (t *blocks) sync() {
	if !t.ordered {
		t.ordered = true
		t.listLive()
	}
	if t.tree.root == 0 && len(t.fresh) >= bulkSync {
		t.build()
		return
	}
	for _, i := range t.fresh {
		if b := t.slab.at(i); b.live && !b.indexed {
			b.indexed = true
			t.treeInsert(i + 1)
		}
	}
	t.fresh = t.fresh[:0]
}

// listLive sets fresh to the slab indexes of the live blocks.
func (t *blocks) listLive() {
	t.fresh = grow.Make[int32](0, max(t.n, 64))
	if t.numbered {
		for i := range int32(t.slab.len()) {
			if t.slab.at(i).live {
				t.fresh = append(t.fresh, i)
			}
		}
		return
	}
	for _, s := range t.slots {
		if s != 0 {
			t.fresh = append(t.fresh, s.index())
		}
	}
}

// compactFresh drops from fresh the blocks freed since (and the repeats of
// a reused slab entry), so that it stays within the live blocks.
func (t *blocks) compactFresh() {
	out := t.fresh[:0]
	for _, i := range t.fresh {
		if b := t.slab.at(i); b.live && !b.indexed {
			b.indexed = true // marks it kept
			out = append(out, i)
		}
	}
	for _, i := range out {
		t.slab.at(i).indexed = false
	}
	t.fresh = out
}

// slab holds the blocks (or their infos), by index, in chunks of
// slabChunk that never move: it grows a chunk at a time, copying nothing
// and leaving no old array behind (an array doubled to n blocks copies n
// and makes the kernel supply 2n blocks of fresh pages, a page fault each).
type slab[E any] struct {
	chunks [][]E
	n      int32
}

const (
	slabShift = 12
	slabChunk = 1 << slabShift
)

// at returns element i, which push or reach made.
func (s *slab[E]) at(i int32) *E { return &s.chunks[i>>slabShift][i&(slabChunk-1)] }

// push adds an element and returns its index.
func (s *slab[E]) push() int32 {
	i := s.n
	s.reach(i)
	return i
}

// reserve makes the empty slab's chunks for n elements at once, slices of
// one array (grow.Make: in huge pages where the command asked for them),
// so that they are first touched 2 MiB at a time rather than 4 KiB, each
// 4 KiB a page fault on the analysis's thread. The array is address space
// until the elements reach it. With h, the array is made there
// (grow.MakeOff: outside the Go heap, where the collector does not count
// it, which matters where n is a guess far above the blocks live, tracer
// replay's from the trace file's size) but for the first chunk, the
// heap's, in small pages: a trace of few blocks live touches only it.
func (s *slab[E]) reserve(n int, h *grow.OffHeap) {
	k := (n + slabChunk - 1) / slabChunk
	if len(s.chunks) > 0 || k == 0 {
		return
	}
	var all []E
	if h != nil {
		s.chunks = append(s.chunks, make([]E, slabChunk))
		k--
		all = grow.MakeOff[E](h, k*slabChunk, k*slabChunk, grow.AllHuge)
	} else {
		all = grow.Make[E](k*slabChunk, k*slabChunk)
	}
	for i := range k {
		s.chunks = append(s.chunks, all[i*slabChunk:(i+1)*slabChunk:(i+1)*slabChunk])
	}
}

// reach makes index i an element of the slab, and every index below it.
func (s *slab[E]) reach(i int32) {
	for int(i>>slabShift) >= len(s.chunks) {
		s.chunks = append(s.chunks, make([]E, slabChunk))
	}
	s.n = max(s.n, i+1)
}

// len is the number of blocks pushed.
func (s *slab[E]) len() int { return int(s.n) }

// capacity is the number of blocks the chunks hold.
func (s *slab[E]) capacity() int { return len(s.chunks) * slabChunk }
