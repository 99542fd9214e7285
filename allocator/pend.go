package allocator

import "math"

// A pool's free set keeps up to three members out of its classes, pend:
// the remainders of the last two splits that MallocHandle's common case
// made, and under expandable_segments the mapped end of an expandable
// segment (pend[2]).
// Most mallocs of a run of small tensors find their exact class empty and
// split a segment's remainder, which moved the remainder from one class to
// another on each of them; kept pending, the next split of it, or a free
// that merges into it, updates pend alone. The second member keeps the
// remainder of a split before the last pending too, where a free often
// merges it a malloc later (a block split from a hole and freed soon).
//
// Every reader of the set treats pend as members. MallocHandle's best fit
// compares them with the classes' lower bound in the set's order (stream,
// size, address), and freeBlockIn merges into them; Delete of a key clears
// its member. Everything else that looks into the classes (the walks,
// bestFit and findFree, FitsUpTo) first puts them into their classes
// (flush). Under expandable_segments the segment's end, the block before
// its unmapped tail, is the best fit of most of its mallocs (until it is
// the largest free block): kept in pend[2], apart from the two others, it
// is split in place (splitTail) rather than moved from class to class.
// The expandable scan (§5) from a best fit with unmapped memory after it
// walks the set in order, which the classes alone do not hold:
// MallocHandle scans only where no pending member lies on the way
// (scanFast), and leaves the rest to mallocSlow, which flushes. Without
// expandable_segments nothing expandable is pending, and pend[2] is unused.
//
// The pending members are on the set's stream found last (lastSt): the
// set puts them into their classes before it finds another. An unused
// member is the zero key, whose size 0 fits no request.

// topBin is the class MallocHandle compares pend with where no class
// fits: empty, and above every size.
var topBin = bin{size: math.MaxInt64}

// flush puts the pending members into their classes.
func (s *sizeSet) flush() {
	if s.pend[0].id|s.pend[1].id|s.pend[2].id != 0 {
		s.flushSlow()
	}
}

func (s *sizeSet) flushSlow() {
	ks := s.pend
	s.pend = [3]freeKey{}
	for _, k := range ks {
		if k.id != 0 {
			s.ReplaceOrInsert(k)
		}
	}
}

// setPend makes k, a key the set does not hold, the newer pending member;
// the newer one before becomes the older, and the older one before goes
// into its class.
func (s *sizeSet) setPend(k freeKey) {
	if s.pend[0].id != 0 {
		if o := s.pend[1]; o.id != 0 {
			s.pend[1] = freeKey{}
			s.ReplaceOrInsert(o)
		}
		s.pend[1] = s.pend[0]
	}
	s.pend[0] = k
}

// setTail makes k, a key the set does not hold, the pending end of an
// expandable segment (pend[2]); the one before goes into its class.
func (s *sizeSet) setTail(k freeKey) {
	if o := s.pend[2]; o.id != 0 {
		s.ReplaceOrInsert(o)
	}
	s.pend[2] = k
}

// deletePend clears the pending member k, if one is, and reports whether
// one was.
func (s *sizeSet) deletePend(k freeKey) bool {
	for j := range s.pend {
		if pe := &s.pend[j]; pe.id != 0 && pe.addr == k.addr && pe.size == k.size && pe.stream == k.stream {
			*pe = freeKey{}
			return true
		}
	}
	return false
}

// pendOf returns the pending member that is block x or y (non-zero ids
// of blocks a free merges), or nil. The three members are tested one by
// one, in order, without a loop: most frees that merge call it.
func (s *sizeSet) pendOf(x, y blockID) *freeKey {
	p := &s.pend
	if id := p[0].id; id != 0 && (id == x || id == y) {
		return &p[0]
	}
	if id := p[1].id; id != 0 && (id == x || id == y) {
		return &p[1]
	}
	if id := p[2].id; id != 0 && (id == x || id == y) {
		return &p[2]
	}
	return nil
}

// taken updates the pending member k that a malloc took: its remainder
// rem at addr stays pending if the malloc split it.
func (k *freeKey) taken(split bool, rem int64, addr uint64) {
	if split {
		k.size, k.addr = rem, addr
		return
	}
	*k = freeKey{}
}

// splitPend is MallocHandle's commonest case, alone and in one line: the
// newer pending member (a remainder split last, never expandable) is the
// best fit for a request of rs bytes (size asked) in pool p, whose stream
// is sb's, and is split again, its remainder staying pending. It reports
// false, having changed nothing, where anything else holds: the older
// member or a class's entry comes first, the member would not be split,
// or the classes' lower bound is what MallocHandle leaves to mallocSlow;
// and always under expandable_segments, where pend[2] and the expandable
// scan are MallocHandle's (the test is made where the split rule reads
// the setting anyway).
func (a *Allocator) splitPend(size, rs int64, small bool, p *blockPool, sb *streamBins) (uint64, Handle, bool) {
	pe := &p.blocks.pend[0]
	bs, ba, rid := pe.size, pe.addr, pe.id
	if bs >= a.conf.MaxSplitSize {
		return 0, 0, false
	}
	rem := bs - rs
	if small {
		if rem < a.conf.MinBlockSize || a.conf.ExpandableSegments {
			return 0, 0, false
		}
	} else if a.conf.ExpandableSegments || rem <= a.conf.SmallSize {
		return 0, 0, false
	}
	if o := &p.blocks.pend[1]; o.size >= rs && (o.size < bs || o.size == bs && o.addr < ba) {
		return 0, 0, false
	}
	// The first non-empty class from the request's: its smallest entry is
	// the classes' lower bound unless it is below the request.
	if c := sb.next(sizeClass(rs)); c >= 0 {
		h := sb.binAt(c)
		if h.size < rs || !(bs < h.size || bs == h.size && ba < h.addr) {
			return 0, 0, false
		}
	}
	if len(a.freeIDs) == 0 && len(a.blocks) == cap(a.blocks) {
		a.growBlocks()
	}
	id := a.takeSlot()
	if a.gcEnabled() {
		p.gcClock++
	}
	st := statTypes(1)
	if small {
		st = 0
	}
	rb := &a.blocks[rid]
	if !a.noBlockStats {
		if rb.isSplit() {
			a.stats.InactiveSplitBytes.dec(st, rs)
		} else {
			a.stats.InactiveSplit.inc(st, 1)
			a.stats.InactiveSplitBytes.inc(st, rem)
		}
	}
	b := &a.blocks[id]
	b.addr, b.size, b.stream, b.requested, b.gcBase = ba, rs, rb.stream, size, 0
	b.prev, b.next, b.pool, b.exp, b.events = rb.prev, rid, rb.pool, 0, 0
	b.allocated, b.mapped, b.live, b.used = true, true, true, false
	if rb.prev != 0 {
		a.blocks[rb.prev].next = id
	}
	rb.prev = id
	rb.addr = ba + uint64(rs)
	rb.size = rem
	rb.gcBase = p.gcClock
	pe.size, pe.addr = rem, ba+uint64(rs)
	if !a.noBlockStats {
		a.stats.Allocation.up(st, 1)
		a.stats.AllocatedBytes.up(st, rs)
		if a.activeApart {
			a.stats.Active.up(st, 1)
			a.stats.ActiveBytes.up(st, rs)
		}
		a.stats.RequestedBytes.up(st, size)
	}
	if a.indexed || a.observed {
		a.allocNoted(id, size, p)
	}
	return ba, Handle(id), true
}

// splitTail is splitPend under expandable_segments for pend[2], the
// pending mapped end of an expandable segment, where no class entry fits a
// request of rs bytes: the best fit where no other pending member fits
// either, which leaves the expandable scan from it nowhere to move (§5).
// It reports false, having changed nothing, where anything else holds.
// Its split is splitPend's written out again, not shared: the compiler
// does not inline a helper of that size into splitPend, the commonest path.
func (a *Allocator) splitTail(size, rs int64, small bool, p *blockPool) (uint64, Handle, bool) {
	pe := &p.blocks.pend[2]
	bs, ba, rid := pe.size, pe.addr, pe.id
	rem := bs - rs
	if bs >= a.conf.MaxSplitSize || rem < a.conf.MinBlockSize ||
		p.blocks.pend[0].size >= rs || p.blocks.pend[1].size >= rs {
		return 0, 0, false
	}
	if len(a.freeIDs) == 0 && len(a.blocks) == cap(a.blocks) {
		a.growBlocks()
	}
	id := a.takeSlot()
	if a.gcEnabled() {
		p.gcClock++
	}
	st := statTypes(1)
	if small {
		st = 0
	}
	// The block is expandable (its next is unmapped): no inactive split
	// statistics.
	rb, b := &a.blocks[rid], &a.blocks[id]
	b.addr, b.size, b.stream, b.requested, b.gcBase = ba, rs, rb.stream, size, 0
	b.prev, b.next, b.pool, b.exp, b.events = rb.prev, rid, rb.pool, rb.exp, 0
	b.allocated, b.mapped, b.live, b.used = true, true, true, false
	if rb.prev != 0 {
		a.blocks[rb.prev].next = id
	}
	rb.prev = id
	rb.addr = ba + uint64(rs)
	rb.size = rem
	rb.gcBase = p.gcClock
	pe.size, pe.addr = rem, ba+uint64(rs)
	if !a.noBlockStats {
		a.stats.Allocation.up(st, 1)
		a.stats.AllocatedBytes.up(st, rs)
		if a.activeApart {
			a.stats.Active.up(st, 1)
			a.stats.ActiveBytes.up(st, rs)
		}
		a.stats.RequestedBytes.up(st, size)
	}
	if a.indexed || a.observed {
		a.allocNoted(id, size, p)
	}
	return ba, Handle(id), true
}

// scanFast is the expandable scan (§5) for MallocHandle from its best fit
// id, a block with unmapped memory after it, for a request of rs bytes:
// either the smallest entry of class ci (h), the classes' lower bound, or
// a pending member of s, sb's set. It returns the class and position the
// scan stops at, or c < 0 where it stays at the pending member; ok is false
// where a pending member lies on the scan's way, for mallocSlow to take.
//
// The pending members that fit come after the class entry (else one would
// be the best fit), where a scan of the classes would miss them. From a
// pending member the scan's only step is to its successor in the set: the
// classes' lower bound (every class entry from (rs, 0) on comes after the
// member) unless another member fits too, and it goes on past that entry
// only if the entry too has unmapped memory after it.
func (a *Allocator) scanFast(sb *streamBins, h *bin, ci int, s *sizeSet, rs int64, id blockID) (c, i int, ok bool) {
	fit := 0
	for j := range s.pend {
		if s.pend[j].size >= rs {
			fit++
		}
	}
	if id == h.id {
		if fit > 0 {
			return 0, 0, false
		}
		c, i = a.expandableScan(sb, h, ci, 0, id)
		return c, i, true
	}
	if fit > 1 || h.id != 0 && a.isTail(h.id) {
		return 0, 0, false
	}
	if h.id != 0 && h.size < a.expSize(id) {
		return ci, 0, true
	}
	return -1, 0, true
}

// isTail reports whether block id (0: none) has unmapped memory after it.
func (a *Allocator) isTail(id blockID) bool {
	if id == 0 {
		return false
	}
	b := &a.blocks[id]
	return b.next != 0 && !a.blocks[b.next].mapped
}
