package allocator

import "math"

// A pool's free set keeps one member out of its classes, pend: the
// remainder of the last split that MallocHandle's common case made. Most
// mallocs of a run of small tensors find their exact class empty and split
// a segment's remainder, which moved the remainder from one class to
// another on each of them; kept pending, the next split of it, or a free
// that merges into it, updates pend alone.
//
// Every reader of the set treats pend as a member. MallocHandle's best fit
// compares it with the classes' lower bound in the set's order (stream,
// size, address), and freeBlockIn merges into it; Delete of its key clears
// it. Everything else that looks into the classes (the walks, bestFit and
// findFree, FitsUpTo) first puts it into its class (flush). Only blocks
// outside expandable segments are pending, so the expandable scan, which
// walks the classes from a block it found, never meets it.

// The pending member is on the set's stream found last (lastSt): the set
// puts it into its class before it finds another. A set without one has
// pend's zero value, whose size 0 fits no request.

// topBin is the class MallocHandle compares pend with where no class
// fits: empty, and above every size.
var topBin = bin{size: math.MaxInt64}

// flush puts pend into its class.
func (s *sizeSet) flush() {
	if s.pend.id != 0 {
		s.flushSlow()
	}
}

func (s *sizeSet) flushSlow() {
	k := s.pend
	s.pend = freeKey{}
	s.ReplaceOrInsert(k)
}

// setPend makes k, a key the set does not hold, the pending member,
// putting the one pending before into its class.
func (s *sizeSet) setPend(k freeKey) {
	if s.pend.id != 0 {
		s.flushSlow()
	}
	s.pend = k
}
