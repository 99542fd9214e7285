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
// of blocks a free merges), or nil.
func (s *sizeSet) pendOf(x, y blockID) *freeKey {
	if s.pend[0].id|s.pend[1].id|s.pend[2].id == 0 {
		return nil
	}
	for j := range s.pend {
		if id := s.pend[j].id; id != 0 && (id == x || id == y) {
			return &s.pend[j]
		}
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
