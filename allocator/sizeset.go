package allocator

import (
	"math/bits"
	"slices"
)

// sizeSet is a pool's free set of mapped blocks (BlockPool::blocks), ordered
// by (stream, size, address) as BlockComparatorSize (§1). It is segregated:
// one streamBins per stream, kept sorted by stream, and inside a stream the
// blocks fall into log-linear size classes, each a small slice sorted by
// (size, address), with a two-level bitmap of the non-empty classes. Best fit
// (the first key not less than (stream, size, 0)) is then a class lookup, a
// short binary search and at most two find-first-set instructions; updates
// move only the entries of one class.
type sizeSet struct {
	streams []uint64 // sorted
	sets    []*streamBins
	// lastB is the bins of stream lastSt, the stream found last, checked
	// first (nearly every request is on the same stream as the previous
	// one). Streams are never removed, so the pointer stays valid.
	lastSt uint64
	lastB  *streamBins
	n      int
}

// sEntry is one free block of a stream.
type sEntry struct {
	size int64
	addr uint64
	id   blockID
}

// streamBins holds the free blocks of one stream by size class.
type streamBins struct {
	pages [(maxClasses + 63) / 64]*binPage // class c is pages[c>>6][c&63]; nil pages are empty
	words [(maxClasses + 63) / 64]uint64   // bit c is set iff class c is non-empty
	sum   uint64                           // bit w is set iff words[w] != 0
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
func sizeClass(size int64) int {
	u := uint64(size) >> classShift
	if u < classLinear {
		return int(u)
	}
	k := bits.Len64(u) - 1 // ≥ classSub+1
	return classLinear + (k-classSub-1)<<classSub + int(u>>(k-classSub)) - 1<<classSub
}

// lb is the index of the first entry of bin not less than (size, addr).
func lb(bin []sEntry, size int64, addr uint64) int {
	lo, hi := 0, len(bin)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		e := &bin[m]
		if e.size < size || (e.size == size && e.addr < addr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
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
	if c < maxClasses {
		if bin := b.bin(c); len(bin) > 0 {
			if i = lb(bin, size, addr); i < len(bin) {
				return c, i, true
			}
		}
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
		bin := b.bin(c)
		// First entry greater than (size, addr), minus one.
		j := lb(bin, size, addr)
		if j < len(bin) && bin[j].size == size && bin[j].addr == addr {
			j++
		}
		if j > 0 {
			return c, j - 1, true
		}
	}
	if c = b.prev(min(c-1, maxClasses-1)); c < 0 {
		return 0, 0, false
	}
	return c, len(b.bin(c)) - 1, true
}

// binPage holds the classes of one bitmap word.
type binPage [64][]sEntry

// bin returns class c.
func (b *streamBins) bin(c int) []sEntry {
	if p := b.pages[c>>6]; p != nil {
		return p[c&63]
	}
	return nil
}

// binPtr returns class c for update, making its page if needed.
func (b *streamBins) binPtr(c int) *[]sEntry {
	p := b.pages[c>>6]
	if p == nil {
		p = new(binPage)
		b.pages[c>>6] = p
	}
	return &p[c&63]
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

// stream returns the bins of stream st, or nil.
func (s *sizeSet) stream(st uint64) *streamBins {
	if s.lastB != nil && s.lastSt == st {
		return s.lastB
	}
	for i, x := range s.streams {
		if x == st {
			s.lastSt, s.lastB = st, s.sets[i]
			return s.lastB
		}
	}
	return nil
}

// streamIndex is the index of the first stream ≥ st.
func (s *sizeSet) streamIndex(st uint64) int {
	i := 0
	for i < len(s.streams) && s.streams[i] < st {
		i++
	}
	return i
}

// Len returns the number of keys.
func (s *sizeSet) Len() int { return s.n }

// ReplaceOrInsert adds k (replacing an equal key).
func (s *sizeSet) ReplaceOrInsert(k freeKey) {
	b := s.stream(k.stream)
	if b == nil {
		i := s.streamIndex(k.stream)
		b = &streamBins{}
		s.streams = slices.Insert(s.streams, i, k.stream)
		s.sets = slices.Insert(s.sets, i, b)
		s.lastSt, s.lastB = k.stream, b
	}
	c := sizeClass(k.size)
	// One page lookup for both the search and the update; most inserts go
	// into an empty class (a freed block's exact class rarely holds another),
	// so the insertion is written out rather than left to slices.Insert.
	bp := b.binPtr(c)
	bin := *bp
	i := lb(bin, k.size, k.addr)
	e := sEntry{size: k.size, addr: k.addr, id: k.id}
	if i < len(bin) && bin[i].size == k.size && bin[i].addr == k.addr {
		bin[i] = e
		return
	}
	n := len(bin)
	if n < cap(bin) {
		bin = bin[:n+1]
		if i < n {
			copy(bin[i+1:], bin[i:n])
		}
		bin[i] = e
	} else {
		if bin == nil {
			bin = make([]sEntry, 0, 4)
		}
		bin = slices.Insert(bin, i, e)
	}
	*bp = bin
	if n == 0 {
		b.setBit(c)
	}
	s.n++
}

// Delete removes k if present.
func (s *sizeSet) Delete(k freeKey) {
	b := s.stream(k.stream)
	if b == nil || k.size < 0 {
		return
	}
	c := sizeClass(k.size)
	bin := b.bin(c)
	i := lb(bin, k.size, k.addr)
	if i < len(bin) && bin[i].size == k.size && bin[i].addr == k.addr {
		s.deleteAt(b, c, i)
	}
}

// deleteAt removes entry i of class c of b.
func (s *sizeSet) deleteAt(b *streamBins, c, i int) {
	bp := &b.pages[c>>6][c&63]
	bin := *bp
	n := len(bin) - 1
	if i < n {
		copy(bin[i:], bin[i+1:])
	}
	*bp = bin[:n]
	if n == 0 {
		b.clearBit(c)
	}
	s.n--
}

func (b *streamBins) key(st uint64, c, i int) freeKey {
	e := &b.pages[c>>6][c&63][i]
	return freeKey{stream: st, size: e.size, addr: e.addr, id: e.id}
}

// first returns the first key not less than k.
func (s *sizeSet) first(k freeKey) (freeKey, bool) {
	var out freeKey
	found := false
	s.AscendGreaterOrEqual(k, func(x freeKey) bool { out, found = x, true; return false })
	return out, found
}

// ascendFrom calls fn on the keys of stream si from class c, index i on, in
// order; it reports whether fn asked to go on.
func (s *sizeSet) ascendFrom(si, c, i int, fn func(freeKey) bool) bool {
	b, st := s.sets[si], s.streams[si]
	for c >= 0 {
		bin := b.bin(c)
		for ; i < len(bin); i++ {
			e := &bin[i]
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
	si := s.streamIndex(pivot.stream)
	if si < len(s.streams) && s.streams[si] == pivot.stream {
		size, addr := pivot.size, pivot.addr
		if size < 0 {
			size, addr = 0, 0
		}
		if c, i, ok := s.sets[si].lowerBound(size, addr); ok {
			if !s.ascendFrom(si, c, i, fn) {
				return
			}
		}
		si++
	}
	for ; si < len(s.streams); si++ {
		if !s.ascendFrom(si, s.sets[si].next(0), 0, fn) {
			return
		}
	}
}

// Ascend calls fn on every key in order until it returns false. fn must not
// modify the set.
func (s *sizeSet) Ascend(fn func(freeKey) bool) {
	for si := range s.streams {
		if !s.ascendFrom(si, s.sets[si].next(0), 0, fn) {
			return
		}
	}
}

// descendFrom calls fn on the keys of stream si from class c, index i down.
func (s *sizeSet) descendFrom(si, c, i int, fn func(freeKey) bool) bool {
	b, st := s.sets[si], s.streams[si]
	for c >= 0 {
		bin := b.bin(c)
		for ; i >= 0; i-- {
			e := &bin[i]
			if !fn(freeKey{stream: st, size: e.size, addr: e.addr, id: e.id}) {
				return false
			}
		}
		if c = b.prev(c - 1); c >= 0 {
			i = len(b.bin(c)) - 1
		}
	}
	return true
}

// DescendLessOrEqual calls fn on each key not greater than pivot, in
// descending order, until fn returns false. fn must not modify the set.
func (s *sizeSet) DescendLessOrEqual(pivot freeKey, fn func(freeKey) bool) {
	si := s.streamIndex(pivot.stream)
	if si < len(s.streams) && s.streams[si] == pivot.stream {
		if c, i, ok := s.sets[si].lastLE(pivot.size, pivot.addr); ok {
			if !s.descendFrom(si, c, i, fn) {
				return
			}
		}
	}
	for si--; si >= 0; si-- {
		b := s.sets[si]
		if c := b.prev(maxClasses - 1); c >= 0 {
			if !s.descendFrom(si, c, len(b.bin(c))-1, fn) {
				return
			}
		}
	}
}
