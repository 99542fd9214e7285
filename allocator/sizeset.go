package allocator

import "math/bits"

// sizeSet is a pool's free set of mapped blocks (BlockPool::blocks), in
// the order of BlockComparatorSize (§1): stream, size, address. Each stream
// has its bins (streamBins): log-linear size classes with a two-level
// bitmap of the non-empty ones, so that best fit (the first key not less
// than (stream, size, 0)) is a class lookup and at most two find-first-set
// instructions.
//
// A class keeps its smallest entry in its 32-byte header and the others in
// its rest. Most classes hold at most one free block, so most operations
// touch the header alone, one cache line. Best fit takes a class's
// smallest entry, and a freed block usually goes back where it was taken:
// the end of a rest kept in descending order, where a slice moves nothing.
// Freed in another order, a crowded class (many free blocks of one size,
// ordered by address) would move its whole rest on each insertion, so past
// restMax entries the rest is a kTree, O(log n) in any order. Streams are
// found by a scan up to streamsFlat of them, then by a map and a kTree.
//
// Positions in a class count in ascending order: 0 is the header's entry,
// k ≥ 1 the k-th entry of the rest.
type sizeSet struct {
	// streams are sorted by stream while idx is nil; past streamsFlat
	// streams idx finds and orders them, and new ones are appended.
	streams []streamRef
	idx     *streamIdx
	// lastB is the bins of stream lastSt, the stream found last, checked
	// first (nearly every request is on the same stream as the previous
	// one). Streams are never removed, so the pointer stays valid.
	lastSt uint64
	lastB  *streamBins
	n      int // the entries of the classes (pend not counted)
	// pend are members of the set kept out of its classes (id 0: none):
	// the remainders of the last two splits on the malloc path, which the
	// next split of one or a free merging into one updates in place, with
	// no class update (see pend.go). pend[0] is the newer; pend[2] is an
	// expandable segment's mapped end, under expandable_segments only.
	pend [3]freeKey
	slab *pageSlab // shared by the allocator's sets (see take); never nil
	// own is the first stream's bins and ownRefs room for two streams,
	// made with the set: most pools see one or two streams, and a fresh
	// allocator then makes no objects of its own for its free sets.
	own     streamBins
	ownRefs [2]streamRef
}

// sEntry is one free block of a stream.
type sEntry struct {
	size int64
	addr uint64
	id   blockID
}

// bin is one size class of a stream: its smallest entry (id 0 when the
// class is empty) and the others, all greater, in its rest. rest is made on
// first need and kept, so a class that fills and empties again allocates
// nothing.
type bin struct {
	size  int64
	addr  uint64
	id    blockID
	nrest int32 // the rest's length, read without following the pointer
	rest  *restBuf
}

func (h *bin) head() sEntry       { return sEntry{size: h.size, addr: h.addr, id: h.id} }
func (h *bin) setHead(e sEntry)   { h.size, h.addr, h.id = e.size, e.addr, e.id }
func (h *bin) setRest(r []sEntry) { h.rest.s, h.nrest = r, int32(len(r)) }
func (h *bin) below(size int64, addr uint64) bool {
	return h.size < size || (h.size == size && h.addr < addr)
}
func (h *bin) is(size int64, addr uint64) bool { return h.size == size && h.addr == addr }

// streamBins holds the free blocks of one stream by size class.
//
// Its page table covers only the pages from base to base+len(pages), the
// range of sizes the stream has held (widened as needed), rather than all
// maxPages: a stream spans few powers of two, and a table of every page
// (1568 bytes at 16 classes a page, 3136 at 8) was most of what a fresh
// allocator cleared. Replaying graphs__default allocated 36 KB a Run with
// whole tables, 21 KB without; at that size the garbage collector, which
// runs once per few MB allocated, costs more than the replay itself.
type streamBins struct {
	words [(maxClasses + 63) / 64]uint64 // bit c is set iff class c is non-empty
	sum   uint64                         // bit w is set iff words[w] != 0
	// pages[i] is page base+i (classes (base+i)<<pageBits on); nil pages,
	// and those outside the table, are empty.
	base  int
	pages []*binPage
	table [8]*binPage // pages' first backing
}

// Size classes: exact in 512-byte units below 64 KiB, then 64 classes per
// power of two (a class spans at most 1/64 of its sizes). The largest int64
// size has class 3135, so the words fit one summary word.
const (
	classShift  = 9
	classSub    = 6
	classLinear = 2 << classSub
)

// maxClasses bounds the classes: sizeClass(math.MaxInt64) < maxClasses
// (checked by TestSizeClass).
const maxClasses = 3136

// sizeClass is the class of a size ≥ 0; it is non-decreasing in size.
//
// With u the size in 512-byte units and e = max(bits.Len64(u)-7, 0), the
// class is e<<6 + u>>e: u itself in the linear range (e = 0), and past it
// 64 classes per power of two. Or-ing 64 into u makes the bit length at
// least 7, which gives e without a branch (the function runs several times
// per malloc and free).
func sizeClass(size int64) int {
	u := uint64(size) >> classShift
	e := uint(bits.Len64(u|1<<classSub)) - (classSub + 1)
	return int(e)<<classSub + int(u>>e)
}

// ge is the number of leading entries of the descending rest not less than
// (size, addr).
func ge(rest []sEntry, size int64, addr uint64) int {
	// Branch-free: base moves by half at each step by arithmetic on the
	// borrow of a 128-bit comparison (size, addr), so the search costs no
	// mispredictions, which a search of a class of many blocks took at
	// nearly every step.
	n := uint(len(rest))
	if n == 0 {
		return 0
	}
	ks := uint64(size) ^ 1<<63 // order-preserving as unsigned
	base := uint(0)
	for n > 1 {
		half := n >> 1
		e := &rest[base+half-1]
		_, b := bits.Sub64(e.addr, addr, 0)
		_, b = bits.Sub64(uint64(e.size)^1<<63, ks, b) // b = 1 iff e is below the key
		base += half & uint(b-1)
		n -= half
	}
	e := &rest[base]
	_, b := bits.Sub64(e.addr, addr, 0)
	_, b = bits.Sub64(uint64(e.size)^1<<63, ks, b)
	return int(base + uint(1-b))
}

// below reports whether e is less than (size, addr).
func (e *sEntry) below(size int64, addr uint64) bool {
	return e.size < size || (e.size == size && e.addr < addr)
}

func (e *sEntry) is(size int64, addr uint64) bool { return e.size == size && e.addr == addr }

// len returns the number of entries of the class.
func (h *bin) len() int {
	if h.id == 0 {
		return 0
	}
	return 1 + int(h.nrest)
}

// at returns the entry at position i.
func (h *bin) at(i int) sEntry {
	if i == 0 {
		return h.head()
	}
	return h.atRest(i)
}

// search returns the position of the first entry not less than (size,
// addr), or -1 when there is none in the class.
func (h *bin) search(size int64, addr uint64) int {
	if h.id == 0 {
		return -1
	}
	if !h.below(size, addr) {
		return 0
	}
	return h.searchRest(size, addr)
}

// searchRest is search past the header's entry, which is below the key.
func (h *bin) searchRest(size int64, addr uint64) int {
	if h.nrest == 0 {
		return -1
	}
	if t := h.rest.t; t != nil {
		if j := t.lowerRank(freeKey{size: size, addr: addr}); j < t.n {
			return j + 1
		}
		return -1
	}
	r := h.rest.s
	j := ge(r, size, addr)
	if j == 0 {
		return -1
	}
	return len(r) - j + 1
}

// next is the first non-empty class ≥ c, or -1.
func (b *streamBins) next(c int) int {
	w := c >> 6
	if w >= len(b.words) {
		return -1
	}
	if m := b.words[w] >> (uint(c) & 63); m != 0 {
		return c + bits.TrailingZeros64(m)
	}
	s := b.sum &^ (1<<(uint(w)+1) - 1)
	if s == 0 {
		return -1
	}
	w = bits.TrailingZeros64(s)
	return w<<6 + bits.TrailingZeros64(b.words[w])
}

// prev is the last non-empty class ≤ c, or -1.
func (b *streamBins) prev(c int) int {
	if c < 0 || len(b.words) == 0 {
		return -1
	}
	w := c >> 6
	if w >= len(b.words) {
		w = len(b.words) - 1
		c = w<<6 + 63
	}
	if m := b.words[w] << (63 - uint(c)&63); m != 0 {
		return c - bits.LeadingZeros64(m)
	}
	s := b.sum & (1<<uint(w) - 1)
	if s == 0 {
		return -1
	}
	w = 63 - bits.LeadingZeros64(s)
	return w<<6 + 63 - bits.LeadingZeros64(b.words[w])
}

// lowerBound finds the first entry not less than (size, addr), size ≥ 0.
func (b *streamBins) lowerBound(size int64, addr uint64) (c, i int, ok bool) {
	c = sizeClass(size)
	if i = b.look(c).search(size, addr); i >= 0 {
		return c, i, true
	}
	if c = b.next(c + 1); c < 0 {
		return 0, 0, false
	}
	return c, 0, true
}

// lastLE finds the last entry not greater than (size, addr).
func (b *streamBins) lastLE(size int64, addr uint64) (c, i int, ok bool) {
	if size < 0 {
		return 0, 0, false
	}
	c = sizeClass(size)
	if c < maxClasses {
		if h := b.bin(c); h != nil && h.id != 0 && !(size < h.size || (size == h.size && addr < h.addr)) {
			// The header's entry is not greater than the key: the answer
			// is in this class, the last entry of rest not greater.
			if h.nrest == 0 {
				return c, 0, true
			}
			if t := h.rest.t; t != nil {
				k := freeKey{size: size, addr: addr}
				j := t.lowerRank(k) // the entries less than the key
				if j < t.n && t.at(j).size == size && t.at(j).addr == addr {
					j++
				}
				return c, j, true
			}
			r := h.rest.s
			j := ge(r, size, addr) // entries ≥ key come first
			if j > 0 && r[j-1].is(size, addr) {
				j--
			}
			if j == len(r) {
				return c, 0, true
			}
			return c, len(r) - j, true
		}
	}
	if c = b.prev(min(c-1, maxClasses-1)); c < 0 {
		return 0, 0, false
	}
	return c, b.bin(c).len() - 1, true
}

// succ is the position of the entry after the one at class c, position i,
// within the stream; ok is false when that entry is the stream's last.
func (b *streamBins) succ(c, i int) (nc, ni int, ok bool) {
	if i+1 < b.binAt(c).len() {
		return c, i + 1, true
	}
	if nc = b.next(c + 1); nc < 0 {
		return 0, 0, false
	}
	return nc, 0, true
}

// first is the class and index of the smallest entry (c < 0 if none), where
// ascendFrom starts a whole stream.
func (b *streamBins) first() (c, i int) {
	return b.next(0), 0
}

// binPage holds pageLen consecutive classes, an eighth of a bitmap word's:
// a stream's free blocks touch few classes of each power of two, so small
// pages spare most of the memory a fresh allocator would otherwise clear.
type binPage [pageLen]bin

const (
	pageBits = 3
	pageLen  = 1 << pageBits
	maxPages = (maxClasses + pageLen - 1) / pageLen
)

// bin returns class c ≥ 0, nil if its page was never made (then it is
// empty).
func (b *streamBins) bin(c int) *bin {
	if i := uint(c>>pageBits - b.base); i < uint(len(b.pages)) {
		if p := b.pages[i]; p != nil {
			return &p[c&(pageLen-1)]
		}
	}
	return nil
}

// noBin is the class look returns for a class whose page was never made:
// empty, and never written.
var noBin bin

// look is bin for reading: an empty class comes back as noBin rather than
// nil, which spares the callers on the malloc and free paths a test.
func (b *streamBins) look(c int) *bin {
	if i := uint(c>>pageBits - b.base); i < uint(len(b.pages)) {
		if p := b.pages[i]; p != nil {
			return &p[c&(pageLen-1)]
		}
	}
	return &noBin
}

// binAt returns class c, whose page exists (the class is non-empty or was
// found by bin).
func (b *streamBins) binAt(c int) *bin {
	return &b.pages[c>>pageBits-b.base][c&(pageLen-1)]
}

// binFor returns class c of b for update, making its page if needed. The
// page must lie in b's table (newBin widens it first).
func (s *sizeSet) binFor(b *streamBins, c int) *bin {
	i := c>>pageBits - b.base
	p := b.pages[i]
	if p == nil {
		p = s.slab.take()
		b.pages[i] = p
	}
	return &p[c&(pageLen-1)]
}

// pageSlab hands out pages to every free set of one allocator, a slab at
// a time: fewer allocations than a page each, and less made and cleared
// in vain than a slab per set (a replay of a small snapshot touches a few
// dozen pages over all its pools and streams).
type pageSlab struct {
	free []binPage // made and not yet used
	// more is how many pages the next slab has beyond slabSize: one more
	// with each slab (take).
	more int
	// spare is the allocator's memory for reuse, which its first Reset
	// makes (reset.go); nil until then.
	spare *spareMem
	// blockPools and privates are private pools' block pools and records
	// made in bulk and not yet handed out (reset.go's newBlockPool and
	// newPrivate).
	blockPools []blockPool
	privates   []privatePool
	// nodes are the trees' nodes of the sets' crowded classes.
	nodes nodeSupply
}

// slabSize is 7 pages: with the 8-byte header that the runtime puts on an
// object with pointers above 512 bytes, they fill the 2 KiB size class,
// where 8 would take 2304 bytes.
const slabSize = 7

// take returns a new empty page. It stays small enough that binFor
// inlines it. Each slab is a page larger than the last: a replay of a
// small snapshot touches a few dozen pages, and one of thousands of
// private pools (a page each) makes them in a few large objects for the
// runtime to allocate and the collector to find, rather than one per seven
// pools. k slabs hold about k²/2 pages: of P pages made, at most about
// √(2P) lie unused.
func (ps *pageSlab) take() *binPage {
	if len(ps.free) == 0 {
		ps.free = make([]binPage, slabSize+ps.more)
		ps.more++
	}
	p := &ps.free[0]
	ps.free = ps.free[1:]
	return p
}

// newBin is binFor of a class whose page does not exist yet, widening the
// page table first if it does not reach the page. It is the slow path of
// an insertion, out of line: the common path only looks the class up
// (bin), and spills no registers for the calls made here.
func (s *sizeSet) newBin(b *streamBins, c int) *bin {
	if pi := c >> pageBits; uint(pi-b.base) >= uint(len(b.pages)) {
		b.growPages(pi, s.slab)
	}
	return s.binFor(b, c)
}

// growPages widens b's page table to cover page pi: at least doubled, so
// that a stream spreading over many pages grows it a few times only.
func (b *streamBins) growPages(pi int, slab *pageSlab) {
	if len(b.pages) == 0 {
		n := len(b.table)
		b.base, b.pages = min(max(pi-n/2, 0), maxPages-n), b.table[:]
		return
	}
	end := b.base + len(b.pages)
	lo, hi := min(b.base, pi), max(end, pi+1)
	n := min(max(2*len(b.pages), hi-lo), maxPages)
	base := min(lo, maxPages-n) // growing up: keep the low end
	if pi < b.base {
		base = max(hi-n, 0) // growing down: keep the high end
	}
	ps := slab.table(b, n)
	copy(ps[b.base-base:], b.pages)
	b.base, b.pages = base, ps
}

func (b *streamBins) setBit(c int) {
	w := c >> 6
	b.words[w] |= 1 << (uint(c) & 63)
	b.sum |= 1 << uint(w)
}

func (b *streamBins) clearBit(c int) {
	w := c >> 6
	b.words[w] &^= 1 << (uint(c) & 63)
	if b.words[w] == 0 {
		b.sum &^= 1 << uint(w)
	}
}

// Len returns the number of keys.
func (s *sizeSet) Len() int {
	n := s.n
	for _, k := range s.pend {
		if k.id != 0 {
			n++
		}
	}
	return n
}

// ReplaceOrInsert adds k (replacing an equal key).
//
// Its common case, on the stream found last and in a class whose page
// exists, is written out with every call in tail position: nothing is live
// across a call, so the common path spills no registers (a call that
// returns into it made the compiler save k on every insertion).
func (s *sizeSet) ReplaceOrInsert(k freeKey) {
	b := s.lastB
	if b == nil || s.lastSt != k.stream {
		s.insertSlow(k)
		return
	}
	c := sizeClass(k.size)
	pi := uint(c>>pageBits - b.base)
	if pi >= uint(len(b.pages)) || b.pages[pi] == nil {
		s.insertSlow(k)
		return
	}
	h := &b.pages[pi][c&(pageLen-1)]
	e := sEntry{size: k.size, addr: k.addr, id: k.id}
	switch { // insertIn, inline
	case h.id == 0:
		h.setHead(e)
		b.setBit(c)
		s.n++
	case e.below(h.size, h.addr):
		s.n++
		if h.rest != nil && (h.rest.t != nil || int(h.nrest) >= restMax) {
			h.pushTree(e, s.slab)
			return
		}
		h.pushDown(e)
	case h.is(e.size, e.addr):
		h.setHead(e)
	default:
		s.insertRest(h, e)
	}
}

// insertSlow is ReplaceOrInsert where the stream is not the last one found
// or the class's page does not exist yet.
func (s *sizeSet) insertSlow(k freeKey) {
	b := s.stream(k.stream)
	if b == nil {
		b = s.newStream(k.stream)
	}
	c := sizeClass(k.size)
	h := b.bin(c)
	if h == nil {
		h = s.newBin(b, c)
	}
	s.insertIn(b, h, c, sEntry{size: k.size, addr: k.addr, id: k.id})
}

// insertIn adds e to class c of b, which is h.
func (s *sizeSet) insertIn(b *streamBins, h *bin, c int, e sEntry) {
	switch {
	case h.id == 0:
		h.setHead(e)
		b.setBit(c)
		s.n++
	case e.below(h.size, h.addr):
		s.n++
		if h.rest != nil && (h.rest.t != nil || int(h.nrest) >= restMax) {
			h.pushTree(e, s.slab)
			return
		}
		h.pushDown(e)
	case h.is(e.size, e.addr):
		h.setHead(e)
	default:
		s.insertRest(h, e)
	}
}

// Delete removes k if present.
//
// As in ReplaceOrInsert, its common case (the stream found last, k the
// smallest entry of its class) takes no call, and the other cases are
// tail calls.
func (s *sizeSet) Delete(k freeKey) {
	if s.pend[0].id|s.pend[1].id|s.pend[2].id != 0 && s.deletePend(k) {
		return
	}
	b := s.lastB
	if b == nil || s.lastSt != k.stream || k.size < 0 {
		s.deleteSlow(k)
		return
	}
	c := sizeClass(k.size)
	h := b.look(c)
	if h.id == 0 || !h.is(k.size, k.addr) {
		s.deleteRestKey(b, c, h, k.size, k.addr)
		return
	}
	if h.nrest == 0 {
		s.emptyClass(b, c, h)
		return
	}
	s.n--
	if t := h.rest.t; t != nil {
		h.deleteTree(t, 0)
		return
	}
	h.deleteRest(0)
}

// deleteSlow is Delete on a stream other than the one found last.
func (s *sizeSet) deleteSlow(k freeKey) {
	b := s.stream(k.stream)
	if b == nil || k.size < 0 {
		return
	}
	c := sizeClass(k.size)
	h := b.look(c)
	if h.id != 0 && h.is(k.size, k.addr) {
		s.deleteAt(b, c, h, 0)
		return
	}
	s.deleteRestKey(b, c, h, k.size, k.addr)
}

// deleteRestKey removes (size, addr) from class c of b, which is h, where
// the header's entry is not it.
func (s *sizeSet) deleteRestKey(b *streamBins, c int, h *bin, size int64, addr uint64) {
	if h.id == 0 || h.nrest == 0 {
		return
	}
	if t := h.rest.t; t != nil {
		// One descent by key, not one to rank the key and another to
		// delete that rank.
		if t.delete(freeKey{size: size, addr: addr}) {
			s.n--
			h.treeShrunk()
		}
		return
	}
	r := h.rest.s
	j := ge(r, size, addr) // r[j-1] is the least entry not less than the key
	if j == 0 || !r[j-1].is(size, addr) {
		return
	}
	s.deleteAt(b, c, h, len(r)-j+1)
}

// deleteAt removes the entry at position i of class c of b, which is h:
// the callers have looked the class up already.
func (s *sizeSet) deleteAt(b *streamBins, c int, h *bin, i int) {
	if i == 0 && h.nrest == 0 {
		s.emptyClass(b, c, h)
		return
	}
	s.n--
	if t := h.rest.t; t != nil {
		h.deleteTree(t, i)
		return
	}
	h.deleteRest(i)
}

// emptyClass removes the only entry of class c of b, which is h. It is
// small enough to inline at the malloc and free paths' call sites.
func (s *sizeSet) emptyClass(b *streamBins, c int, h *bin) {
	s.n--
	h.setHead(sEntry{})
	b.clearBit(c)
}

// takeHead removes the smallest entry of class h, which holds more than
// one, and returns its block.
func (s *sizeSet) takeHead(h *bin) blockID {
	id := h.id
	s.n--
	if t := h.rest.t; t != nil {
		h.deleteTree(t, 0)
		return id
	}
	h.deleteRest(0)
	return id
}

func (b *streamBins) key(st uint64, c, i int) freeKey {
	return b.binAt(c).key(st, i)
}

// key is the key of the entry at position i, on stream st.
func (h *bin) key(st uint64, i int) freeKey {
	if i == 0 {
		return freeKey{stream: st, size: h.size, addr: h.addr, id: h.id}
	}
	return h.keyRest(st, i)
}

// ascendFrom calls fn on the keys of stream x from class c, position i
// on, in order; it reports whether fn asked to go on.
func (s *sizeSet) ascendFrom(x streamRef, c, i int, fn func(freeKey) bool) bool {
	b, st := x.b, x.st
	for c >= 0 {
		h := b.bin(c)
		for n := h.len(); i < n; i++ {
			e := h.at(i)
			if !fn(freeKey{stream: st, size: e.size, addr: e.addr, id: e.id}) {
				return false
			}
		}
		c, i = b.next(c+1), 0
	}
	return true
}

// AscendGreaterOrEqual calls fn on each key not less than pivot, in order,
// until fn returns false. fn must not modify the set.
func (s *sizeSet) AscendGreaterOrEqual(pivot freeKey, fn func(freeKey) bool) {
	s.flush()
	si := s.streamIndex(pivot.stream)
	if si < len(s.streams) && s.ordered(si).st == pivot.stream {
		size, addr := pivot.size, pivot.addr
		if size < 0 {
			size, addr = 0, 0
		}
		x := s.ordered(si)
		if c, i, ok := x.b.lowerBound(size, addr); ok {
			if !s.ascendFrom(x, c, i, fn) {
				return
			}
		}
		si++
	}
	for ; si < len(s.streams); si++ {
		x := s.ordered(si)
		if c, i := x.b.first(); !s.ascendFrom(x, c, i, fn) {
			return
		}
	}
}

// Ascend calls fn on every key in order until it returns false. fn must not
// modify the set.
func (s *sizeSet) Ascend(fn func(freeKey) bool) {
	s.flush()
	s.ascendClasses(fn)
}

// ascendClasses is Ascend of the classes alone, leaving pend where it is.
func (s *sizeSet) ascendClasses(fn func(freeKey) bool) {
	for si := range s.streams {
		x := s.ordered(si)
		if c, i := x.b.first(); !s.ascendFrom(x, c, i, fn) {
			return
		}
	}
}

// descendFrom calls fn on the keys of stream x from class c, position i
// down, in descending order.
func (s *sizeSet) descendFrom(x streamRef, c, i int, fn func(freeKey) bool) bool {
	b, st := x.b, x.st
	for c >= 0 {
		h := b.bin(c)
		for ; i >= 0; i-- {
			e := h.at(i)
			if !fn(freeKey{stream: st, size: e.size, addr: e.addr, id: e.id}) {
				return false
			}
		}
		if c = b.prev(c - 1); c >= 0 {
			i = b.bin(c).len() - 1
		}
	}
	return true
}

// DescendLessOrEqual calls fn on each key not greater than pivot, in
// descending order, until fn returns false. fn must not modify the set.
func (s *sizeSet) DescendLessOrEqual(pivot freeKey, fn func(freeKey) bool) {
	s.flush()
	si := s.streamIndex(pivot.stream)
	if si < len(s.streams) && s.ordered(si).st == pivot.stream {
		x := s.ordered(si)
		if c, i, ok := x.b.lastLE(pivot.size, pivot.addr); ok {
			if !s.descendFrom(x, c, i, fn) {
				return
			}
		}
	}
	for si--; si >= 0; si-- {
		x := s.ordered(si)
		if c := x.b.prev(maxClasses - 1); c >= 0 {
			if !s.descendFrom(x, c, x.b.bin(c).len()-1, fn) {
				return
			}
		}
	}
}
