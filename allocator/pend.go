package allocator

import "math"

// A pool's free set keeps two members out of its classes, pend: the
// remainders of the last two splits that MallocHandle's common case made.
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
// (flush). Only blocks outside expandable segments are pending, so the
// expandable scan, which walks the classes from a block it found, never
// meets one; and nothing is pending under expandable_segments (MallocHandle
// makes a member pending only without), so that MallocHandle's expandable
// path tests for none.
//
// The pending members are on the set's stream found last (lastSt): the
// set puts them into their classes before it finds another. An unused
// member is the zero key, whose size 0 fits no request.

// topBin is the class MallocHandle compares pend with where no class
// fits: empty, and above every size.
var topBin = bin{size: math.MaxInt64}

// flush puts the pending members into their classes.
func (s *sizeSet) flush() {
	if s.pend[0].id|s.pend[1].id != 0 {
		s.flushSlow()
	}
}

func (s *sizeSet) flushSlow() {
	ks := s.pend
	s.pend = [2]freeKey{}
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
	if s.pend[0].id|s.pend[1].id == 0 {
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
