package analysis

import (
	"cmp"
	"slices"

	"github.com/tracer-dev/tracer/internal/ordered"
)

// blockSegment returns the segment counting b, or nil.
func (s *Summarizer) blockSegment(b *block) *segment {
	if !b.inSeg {
		return nil
	}
	return s.segs.find(b.addr)
}

// unmap applies a segment_unmap of [addr, addr+size). When it splits a
// mapped range holding blocks, the two pieces' counters are the sums of the
// blocks in each (rangeSum, O(log n)).
func (s *Summarizer) unmap(addr, size int64) {
	if !s.corrupt && s.live.rangeSum(addr, addr+size).cnt > 0 {
		s.corrupt = true // memory unmapped under live blocks
	}
	g, tail := s.segs.unmapRange(addr, size)
	if g == nil {
		return
	}
	for _, p := range []*segment{g, tail} {
		sum := s.live.rangeSum(p.addr, p.end())
		s.segs.adjust(p, func(p *segment) {
			p.allocated, p.active, p.blocks = sum.alc, sum.act, sum.cnt
		})
	}
}

// layoutOf is g as a SegmentLayout.
func layoutOf(g *segment) SegmentLayout {
	l := SegmentLayout{Addr: uint64(g.addr), Size: Bytes(g.size), Stream: g.stream,
		Expandable: g.expandable, Blocks: g.blocks, Allocated: Bytes(g.allocated),
		PendingFree: Bytes(g.active - g.allocated)}
	if g.blocks > 0 {
		l.SplitFree = Bytes(g.size - g.active)
	} else {
		l.Free = Bytes(g.size - g.active)
	}
	return l
}

// snapshotLayout brings the layout copy up to the segments' state. Only the
// segments changed since the last copy are copied again: a plateau of
// peaks costs the segments its events touched, not every segment.
func (s *Summarizer) snapshotLayout() {
	s.layoutStale = false
	sg := &s.segs
	if sg.changedAll {
		s.layout = ordered.Map[int64, SegmentLayout]{}
		sg.tree.Each(func(addr int64, g *segment) {
			s.layout.Insert(addr, layoutOf(g))
			s.layoutCopies++
			g.laidOut = false
		})
		sg.changedAll, sg.changed = false, sg.changed[:0]
		return
	}
	for _, addr := range sg.changed {
		if g, ok := sg.tree.Get(addr); ok {
			s.layout.Insert(addr, layoutOf(g)) // in place where the copy had addr
			s.layoutCopies++
			g.laidOut = false
		} else {
			s.layout.Remove(addr)
		}
	}
	sg.changed = sg.changed[:0]
}

// layoutSlice returns the layout copy in address order (nil when empty).
func (s *Summarizer) layoutSlice() []SegmentLayout {
	if s.layout.Len() == 0 {
		return nil
	}
	out := make([]SegmentLayout, 0, s.layout.Len())
	s.layout.Each(func(_ int64, l SegmentLayout) { out = append(out, l) })
	return out
}

// largestFree returns the largest free gap in any segment and in segments
// of stream, treating the extra ranges as occupied. Each segment's gap is
// kept in heaps and recomputed, O(log n), only where blocks changed since
// the last call; only the segments under extra are computed afresh. A
// corrupt state (overlapping blocks or segments, blocks outside their
// segment) is swept instead, as the rule defines it.
func (s *Summarizer) largestFree(stream uint64, extra []extent) (any, same int64) {
	ext := append(s.scratch[:0], extra...)
	slices.SortFunc(ext, func(a, b extent) int { return cmp.Compare(a.addr, b.addr) })
	s.scratch = ext
	if s.misfits > 0 || s.corrupt || s.segs.overlap || s.live.overlapping() || s.extentsOverlap(ext) {
		return s.largestFreeSweep(stream, extra)
	}
	s.flushGaps()
	// The segments under the extra ranges leave the heaps while the rest
	// answer, and come back with their gaps recomputed.
	var touched []*segment
	for _, e := range ext {
		s.segs.tree.Ascend(e.addr, func(_ int64, g *segment) bool {
			if g.addr >= e.end {
				return false
			}
			if g.end() > e.addr && g.heapAny >= 0 {
				s.segs.any.remove(g)
				s.segs.streamHeap(g.stream).remove(g)
				touched = append(touched, g)
			}
			return true
		})
	}
	any = s.segs.any.top()
	if h := s.segs.byStream[stream]; h != nil {
		same = h.top()
	}
	for _, g := range touched {
		best := s.segGap(g, ext)
		any = max(any, best)
		if g.stream == stream {
			same = max(same, best)
		}
		s.segs.any.push(g)
		s.segs.streamHeap(g.stream).push(g)
	}
	return any, same
}

// extentsOverlap reports whether the sorted extents overlap each other or
// a live block.
func (s *Summarizer) extentsOverlap(ext []extent) bool {
	for i, e := range ext {
		if i > 0 && ext[i-1].end > e.addr {
			return true
		}
		// Blocks do not overlap here, so the last block starting before
		// e.end is the one that would reach into e.
		if b := s.live.before(e.end); b != nil && b.addr+b.size > e.addr {
			return true
		}
	}
	return false
}

// flushGaps recomputes the gaps of the segments whose blocks changed.
func (s *Summarizer) flushGaps() {
	for _, g := range s.segs.stale {
		if !g.inTree || !g.gapStale {
			continue
		}
		g.gapStale = false
		g.gap = s.segGap(g, nil)
		s.segs.any.fix(g.heapAny)
		h := s.segs.streamHeap(g.stream)
		h.fix(g.heapStream)
	}
	s.segs.stale = s.segs.stale[:0]
}

// segGap is the largest free gap of g, its blocks and the extents in ext
// (sorted, not overlapping) occupied, in O(log n) per extent inside g.
func (s *Summarizer) segGap(g *segment, ext []extent) int64 {
	f := gapFold{cursor: g.addr}
	if b := s.live.before(g.addr); b != nil {
		f.cursor = max(f.cursor, b.addr+b.size)
	}
	pos := g.addr
	// The extents do not overlap: their ends rise with their addresses.
	first, _ := slices.BinarySearchFunc(ext, g.addr, func(e extent, a int64) int { return cmp.Compare(e.end, a+1) })
	for _, e := range ext[first:] {
		if e.addr >= g.end() {
			break
		}
		if e.addr < g.addr {
			f.cursor = max(f.cursor, e.end)
			continue
		}
		s.live.foldGaps(pos, e.addr, &f)
		f.add(e.addr, e.end, 0)
		pos = e.addr
	}
	s.live.foldGaps(pos, g.end(), &f)
	return max(f.best, g.end()-f.cursor)
}

// largestFreeSweep is largestFree by a sweep of every live block and
// segment: the rule itself, for corrupt states.
func (s *Summarizer) largestFreeSweep(stream uint64, extra []extent) (any, same int64) {
	occ := append([]extent(nil), extra...)
	s.live.each(func(b *block) { occ = append(occ, extent{b.addr, b.addr + b.size}) })
	slices.SortFunc(occ, func(a, b extent) int { return cmp.Compare(a.addr, b.addr) })
	return s.segs.largestGaps(occ, stream)
}
