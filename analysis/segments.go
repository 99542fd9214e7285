package analysis

import "github.com/tracer-dev/tracer/internal/ordered"

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

	inTree bool // in segments.tree (not freed)
	// The largest free block: gap is the largest free gap inside, valid
	// unless gapStale; heapAny and heapStream are the segment's places in
	// segments.any and its stream's heap (-1: not in it).
	gap                 int64
	gapStale            bool
	heapAny, heapStream int
	// laidOut: the segment has changed since the last layout copy and its
	// address is in segments.changed.
	laidOut bool
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

// segments keeps the reserved ranges ordered by address, and what the
// summarizer derives from them incrementally: the inactive split bytes,
// each segment's largest free gap (recomputed, when asked for, only for
// the segments whose blocks changed), and which segments changed since the
// layout was last copied.
type segments struct {
	tree ordered.Map[int64, *segment] // by address
	// The last two segments found: allocations cluster, in a segment of
	// each pool.
	last, prev *segment
	pool       []*segment // freed segments, reused: no allocation per segment_alloc
	// split sums splitFree over all segments and over the non-expandable
	// ones (PyTorch's inactive_split_bytes ignores expandable segments).
	split, splitFixed int64
	// overlap: two segments overlapped (a corrupt trace); the largest free
	// block is then swept for.
	overlap bool

	stale    []*segment // segments whose gap is stale
	any      segHeap    // every segment by gap
	byStream map[uint64]*segHeap

	// changed lists the addresses of segments changed since the last
	// layout copy (a segment's at most once while laidOut); changedAll
	// says the list overflowed, and the next copy is whole.
	changed    []int64
	changedAll bool
}

func newSegments() segments {
	return segments{any: segHeap{stream: false}, byStream: map[uint64]*segHeap{}, changedAll: true}
}

// newSegment returns a zeroed segment, reusing a freed one when it can.
func (s *segments) newSegment() *segment {
	if n := len(s.pool); n > 0 {
		g := s.pool[n-1]
		s.pool = s.pool[:n-1]
		*g = segment{heapAny: -1, heapStream: -1}
		return g
	}
	return &segment{heapAny: -1, heapStream: -1}
}

// find returns the segment holding addr, or nil.
func (s *segments) find(addr int64) *segment {
	if g := s.last; g != nil && g.addr <= addr && addr < g.end() {
		return g
	}
	if g := s.prev; g != nil && g.addr <= addr && addr < g.end() {
		s.last, s.prev = g, s.last
		return g
	}
	// The segments do not overlap, so only the last one starting at or
	// before addr can hold it.
	if _, g, ok := s.tree.Floor(addr); ok && addr < g.end() {
		s.last, s.prev = g, s.last
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
	s.touch(g)
}

// touch notes that g changed: its gap and its layout.
func (s *segments) touch(g *segment) {
	if !g.gapStale {
		g.gapStale = true
		if len(s.stale) > 2*s.tree.Len()+64 {
			s.compactStale()
		}
		s.stale = append(s.stale, g)
	}
	if !g.laidOut {
		g.laidOut = true
		s.noteChanged(g.addr)
	}
}

// noteChanged adds addr to the changed list, or gives the list up for a
// whole copy when it outgrows the segments.
func (s *segments) noteChanged(addr int64) {
	if s.changedAll {
		return
	}
	if len(s.changed) > 2*s.tree.Len()+64 {
		s.changedAll, s.changed = true, s.changed[:0]
		return
	}
	s.changed = append(s.changed, addr)
}

func (s *segments) insert(g *segment) {
	if _, p, ok := s.tree.Floor(g.addr); ok && p.end() > g.addr {
		s.overlap = true
	}
	if _, n, ok := s.tree.Floor(g.end() - 1); ok && n.addr >= g.addr {
		s.overlap = true
	}
	if s.overlap {
		if _, dup := s.tree.Get(g.addr); dup {
			return // an exact duplicate cannot be keyed; it stays out, unmatched
		}
	}
	s.tree.Insert(g.addr, g)
	g.inTree = true
	s.last, s.prev = nil, nil
	s.split += g.splitFree()
	if !g.expandable {
		s.splitFixed += g.splitFree()
	}
	s.any.push(g)
	s.streamHeap(g.stream).push(g)
	g.gapStale = false // so that touch lists it as stale, whatever it was
	s.touch(g)
	s.noteChanged(g.addr) // its address, new even where laidOut was set
}

func (s *segments) streamHeap(stream uint64) *segHeap {
	h := s.byStream[stream]
	if h == nil {
		h = &segHeap{stream: true}
		s.byStream[stream] = h
	}
	return h
}

// remove deletes the segment starting at addr and returns it, or nil.
func (s *segments) remove(addr int64) *segment {
	g, ok := s.tree.Remove(addr)
	if !ok {
		return nil
	}
	g.inTree = false
	s.last, s.prev = nil, nil
	s.split -= g.splitFree()
	if !g.expandable {
		s.splitFixed -= g.splitFree()
	}
	s.any.remove(g)
	s.streamHeap(g.stream).remove(g)
	s.noteChanged(addr)
	return g
}

// mapRange adds [addr, addr+size) of an expandable segment, merging it with
// mapped neighbours it touches: when it joins two ranges, the later one is
// absorbed into the earlier and its counters with it.
func (s *segments) mapRange(addr, size int64, stream uint64) {
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
	case prev != nil:
		s.adjust(prev, func(g *segment) { g.size += size })
	case next != nil:
		s.remove(next.addr)
		next.addr, next.size = addr, next.size+size
		s.insert(next)
	default:
		g := s.newSegment()
		g.addr, g.size, g.stream, g.expandable = addr, size, stream, true
		s.insert(g)
	}
}

// unmapRange removes [addr, addr+size) from the mapped range holding it.
// The piece before the hole keeps the range's identity and counters (or the
// piece after it when there is none before). When the range is split in two
// around blocks it returns both pieces, whose counters the caller must
// recompute from the blocks.
func (s *segments) unmapRange(addr, size int64) (g, tail *segment) {
	g = s.find(addr)
	if g == nil {
		return nil, nil
	}
	end, gend := addr+size, g.end()
	s.remove(g.addr)
	switch {
	case g.addr < addr:
		g.size = addr - g.addr
		s.insert(g)
		if end < gend {
			t := s.newSegment()
			t.addr, t.size, t.stream, t.expandable = end, gend-end, g.stream, true
			s.insert(t)
			if g.blocks > 0 {
				return g, t
			}
		}
	case end < gend:
		g.addr, g.size = end, gend-end
		s.insert(g)
	}
	return nil, nil
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
	s.touch(g)
}

// extent is an occupied address range, used to sweep for free gaps.
type extent struct{ addr, end int64 }

// largestGaps returns the largest free gap in any segment and in segments
// of the given stream, sweeping every segment against occupied, sorted by
// address: the exact rule for states whose blocks or segments overlap.
func (s *segments) largestGaps(occupied []extent, stream uint64) (any, same int64) {
	j := 0
	s.tree.Each(func(_ int64, g *segment) {
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
	})
	return any, same
}

// segHeap is a max-heap of segments by gap, each knowing its place.
type segHeap struct {
	h      []*segment
	stream bool // the place is heapStream, else heapAny
}

func (q *segHeap) idx(g *segment) *int {
	if q.stream {
		return &g.heapStream
	}
	return &g.heapAny
}

func (q *segHeap) top() int64 {
	if len(q.h) == 0 {
		return 0
	}
	return q.h[0].gap
}

func (q *segHeap) push(g *segment) {
	*q.idx(g) = len(q.h)
	q.h = append(q.h, g)
	q.up(len(q.h) - 1)
}

func (q *segHeap) remove(g *segment) {
	i := *q.idx(g)
	if i < 0 {
		return
	}
	last := len(q.h) - 1
	q.swap(i, last)
	q.h = q.h[:last]
	*q.idx(g) = -1
	if i < last {
		q.fix(i)
	}
}

// fix restores the heap after the gap at place i changed.
func (q *segHeap) fix(i int) {
	if !q.up(i) {
		q.down(i)
	}
}

func (q *segHeap) swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	*q.idx(q.h[i]) = i
	*q.idx(q.h[j]) = j
}

func (q *segHeap) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if q.h[p].gap >= q.h[i].gap {
			break
		}
		q.swap(i, p)
		i, moved = p, true
	}
	return moved
}

func (q *segHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(q.h) {
			return
		}
		if r := c + 1; r < len(q.h) && q.h[r].gap > q.h[c].gap {
			c = r
		}
		if q.h[i].gap >= q.h[c].gap {
			return
		}
		q.swap(i, c)
		i = c
	}
}

// compactStale drops from the stale list the segments freed since and the
// repeats (a segment freed and reused comes back), so that the list stays
// within the segments however long no one asks for a gap.
func (s *segments) compactStale() {
	out := s.stale[:0]
	for _, g := range s.stale {
		if g.inTree && g.gapStale {
			g.gapStale = false // marks it kept
			out = append(out, g)
		}
	}
	for _, g := range out {
		g.gapStale = true
	}
	s.stale = out
}
