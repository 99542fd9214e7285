package analysis

import "slices"

// segment is one contiguous range of reserved memory: a cudaMalloc'd segment,
// or a contiguous mapped range of an expandable segment (adjacent mapped
// ranges merge; an unmap in the middle splits one). Blocks cannot span two
// segments, so free space is computed per segment.
type segment struct {
	addr, size int64 // addr as int64 keeps the arithmetic simple; device VAs fit
	stream     uint64
	expandable bool
	allocated  int64 // bytes of allocated blocks inside
	active     int64 // bytes of active blocks (allocated + pending free) inside
	blocks     int32 // number of active blocks inside
}

func (g *segment) end() int64 { return g.addr + g.size }

// splitFree is the free bytes of g when it also holds an active block
// (inactive split bytes), else 0.
func (g *segment) splitFree() int64 {
	if g.blocks > 0 {
		return g.size - g.active
	}
	return 0
}

// segments keeps the reserved ranges sorted by address. Segment events are
// rare next to block events, so insertion by copying is cheap; the hot path
// is find, a binary search.
type segments struct {
	list   []*segment
	starts []int64    // list[i].addr, searched without touching the segments
	last   *segment   // the last segment found: allocations cluster
	pool   []*segment // freed segments, reused: no allocation per segment_alloc
	// split sums splitFree over all segments and over the non-expandable
	// ones (PyTorch's inactive_split_bytes ignores expandable segments).
	split, splitFixed int64
}

// newSegment returns a zeroed segment, reusing a freed one when it can.
func (s *segments) newSegment() *segment {
	if n := len(s.pool); n > 0 {
		g := s.pool[n-1]
		s.pool = s.pool[:n-1]
		*g = segment{}
		return g
	}
	return new(segment)
}

// find returns the segment holding addr, or nil.
func (s *segments) find(addr int64) *segment {
	if g := s.last; g != nil && g.addr <= addr && addr < g.end() {
		return g
	}
	// Binary search for the last segment starting at or before addr; the
	// segments do not overlap, so only it can hold addr.
	st := s.starts
	lo, hi := 0, len(st)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if st[m] <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return nil
	}
	if g := s.list[lo-1]; addr < g.addr+g.size {
		s.last = g
		return g
	}
	return nil
}

// adjust applies a change to g through fn, keeping the split sums current.
func (s *segments) adjust(g *segment, fn func(g *segment)) {
	before := g.splitFree()
	fn(g)
	d := g.splitFree() - before
	s.split += d
	if !g.expandable {
		s.splitFixed += d
	}
}

func (s *segments) insert(g *segment) {
	i, _ := slices.BinarySearchFunc(s.list, g.addr, func(x *segment, a int64) int { return cmpInt(x.addr, a) })
	s.list = slices.Insert(s.list, i, g)
	s.starts = slices.Insert(s.starts, i, g.addr)
	s.last = nil
	s.split += g.splitFree()
	if !g.expandable {
		s.splitFixed += g.splitFree()
	}
}

// remove deletes the segment starting at addr and returns it, or nil.
func (s *segments) remove(addr int64) *segment {
	i, ok := slices.BinarySearchFunc(s.list, addr, func(x *segment, a int64) int { return cmpInt(x.addr, a) })
	if !ok {
		return nil
	}
	g := s.list[i]
	s.list = slices.Delete(s.list, i, i+1)
	s.starts = slices.Delete(s.starts, i, i+1)
	s.last = nil
	s.split -= g.splitFree()
	if !g.expandable {
		s.splitFixed -= g.splitFree()
	}
	return g
}

// mapRange adds [addr, addr+size) of an expandable segment, merging it with
// mapped neighbours it touches. When it joins two ranges, the later one is
// absorbed into the earlier and returned, with the survivor, so the caller
// can re-point the absorbed range's blocks.
func (s *segments) mapRange(addr, size int64, stream uint64) (absorbed, into *segment) {
	end := addr + size
	var prev, next *segment
	if g := s.find(addr - 1); g != nil && g.expandable && g.end() == addr {
		prev = g
	}
	if g := s.find(end); g != nil && g.expandable && g.addr == end {
		next = g
	}
	switch {
	case prev != nil && next != nil:
		s.remove(next.addr)
		s.adjust(prev, func(g *segment) {
			g.size += size + next.size
			g.allocated += next.allocated
			g.active += next.active
			g.blocks += next.blocks
		})
		return next, prev
	case prev != nil:
		s.adjust(prev, func(g *segment) { g.size += size })
	case next != nil:
		s.remove(next.addr)
		next.addr, next.size = addr, next.size+size
		s.insert(next)
	default:
		s.insert(&segment{addr: addr, size: size, stream: stream, expandable: true})
	}
	return nil, nil
}

// unmapRange removes [addr, addr+size) from the mapped range holding it.
// The piece before the hole keeps the range's identity and counters (or the
// piece after it when there is none before). It reports whether the range
// was split in two around blocks, in which case the caller must rebuild the
// per-segment block counters: the pieces' shares are not known without the
// blocks.
func (s *segments) unmapRange(addr, size int64) (split bool) {
	g := s.find(addr)
	if g == nil {
		return false
	}
	end, gend := addr+size, g.end()
	s.remove(g.addr)
	switch {
	case g.addr < addr:
		g.size = addr - g.addr
		s.insert(g)
		if end < gend {
			s.insert(&segment{addr: end, size: gend - end, stream: g.stream, expandable: true})
			return g.blocks > 0
		}
	case end < gend:
		g.addr, g.size = end, gend-end
		s.insert(g)
	}
	return false
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// extent is an occupied address range, used to sweep for free gaps.
type extent struct{ addr, end int64 }

// largestGaps returns the largest free gap in any segment and in segments
// of the given stream. occupied must be sorted by address.
func (s *segments) largestGaps(occupied []extent, stream uint64) (any, same int64) {
	j := 0
	for _, g := range s.list {
		for j < len(occupied) && occupied[j].end <= g.addr {
			j++
		}
		cursor := g.addr
		var best int64
		for k := j; k < len(occupied) && occupied[k].addr < g.end(); k++ {
			if gap := occupied[k].addr - cursor; gap > best {
				best = gap
			}
			cursor = max(cursor, occupied[k].end)
		}
		if gap := g.end() - cursor; gap > best {
			best = gap
		}
		any = max(any, best)
		if g.stream == stream {
			same = max(same, best)
		}
	}
	return any, same
}

// addBlock changes g's block counters (negative to remove), keeping the split
// sums current. It is adjust without a closure, for the per-event path.
func (s *segments) addBlock(g *segment, allocated, active int64, blocks int32) {
	before := g.splitFree()
	g.allocated += allocated
	g.active += active
	g.blocks += blocks
	d := g.splitFree() - before
	s.split += d
	if !g.expandable {
		s.splitFixed += d
	}
}
