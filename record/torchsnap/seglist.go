package torchsnap

import (
	"slices"
	"sort"

	"github.com/tracer-dev/tracer/internal/ordered"
)

// segList is a state's ranges (segments and mapped ranges) sorted by
// address, in an ordered map: undoing or validating a segment event costs
// O(log n), where a sorted slice moved every range after it. Ranges that
// overlap or share an address (a trace that contradicts itself) turn it
// into that sorted slice for good (flat), whose binary searches define
// what such a state means, so that the result stays the same.
type segList struct {
	m      ordered.Map[uint64, *segRange]
	flat   []*segRange
	isFlat bool
}

// newSegList returns the ranges of sorted, which is sorted by address.
func newSegList(sorted []*segRange) *segList {
	l := &segList{}
	for i := 1; i < len(sorted); i++ {
		if sorted[i-1].end() > sorted[i].addr || sorted[i-1].addr == sorted[i].addr {
			l.flat, l.isFlat = sorted, true
			return l
		}
	}
	for _, s := range sorted {
		l.m.Insert(s.addr, s)
	}
	return l
}

// Len returns the number of ranges.
func (l *segList) Len() int {
	if l.isFlat {
		return len(l.flat)
	}
	return l.m.Len()
}

// list returns the ranges in address order.
func (l *segList) list() []*segRange {
	if l.isFlat {
		return l.flat
	}
	out := make([]*segRange, 0, l.m.Len())
	l.m.Each(func(_ uint64, s *segRange) { out = append(out, s) })
	return out
}

// clone returns a copy whose ranges are copies.
func (l *segList) clone() *segList {
	src := l.list()
	cp := make([]*segRange, len(src))
	for i, s := range src {
		c := *s
		cp[i] = &c
	}
	return newSegList(cp)
}

// goFlat turns l into the sorted slice.
func (l *segList) goFlat() {
	if !l.isFlat {
		l.flat, l.isFlat = l.list(), true
		l.m = ordered.Map[uint64, *segRange]{}
	}
}

// find returns the first range (by address) that ends after addr, and
// whether it holds addr.
func (l *segList) find(addr uint64) (*segRange, bool) {
	if l.isFlat {
		j := sort.Search(len(l.flat), func(i int) bool { return l.flat[i].end() > addr })
		if j == len(l.flat) {
			return nil, false
		}
		return l.flat[j], l.flat[j].addr <= addr
	}
	if _, f, ok := l.m.Floor(addr); ok && f.end() > addr {
		return f, true
	}
	if addr == ^uint64(0) {
		return nil, false
	}
	if _, c, ok := l.m.Ceil(addr + 1); ok {
		return c, false
	}
	return nil, false
}

// overlaps reports whether [addr, end) overlaps a range or starts where one does.
func (l *segList) overlaps(addr, end uint64) bool {
	if c, _, ok := l.m.Ceil(addr); ok && (c == addr || c < end) {
		return true
	}
	if addr > 0 {
		if _, f, ok := l.m.Floor(addr - 1); ok && f.end() > addr {
			return true
		}
	}
	return false
}

// insert adds s.
func (l *segList) insert(s *segRange) {
	if !l.isFlat && l.overlaps(s.addr, s.end()) {
		l.goFlat()
	}
	if l.isFlat {
		j := sort.Search(len(l.flat), func(i int) bool { return l.flat[i].addr >= s.addr })
		l.flat = slices.Insert(l.flat, j, s)
		return
	}
	l.m.Insert(s.addr, s)
}

// removeStart removes the range find(addr) returns when it starts at addr.
func (l *segList) removeStart(addr uint64) {
	if l.isFlat {
		j := sort.Search(len(l.flat), func(i int) bool { return l.flat[i].end() > addr })
		if j < len(l.flat) && l.flat[j].addr == addr {
			l.flat = slices.Delete(l.flat, j, j+1)
		}
		return
	}
	if s, ok := l.find(addr); ok && s.addr == addr {
		l.m.Remove(addr)
	}
}

// mapRange adds s, a mapped range, joined with the mapped ranges of its
// stream it touches (undoing segment_unmap, or replaying segment_map).
func (l *segList) mapRange(s *segRange) {
	if !l.isFlat && l.overlaps(s.addr, s.end()) {
		l.goFlat()
	}
	if l.isFlat {
		segs := l.flat
		j := sort.Search(len(segs), func(i int) bool { return segs[i].addr >= s.addr })
		if j < len(segs) && segs[j].expandable && segs[j].addr == s.end() && segs[j].stream == s.stream {
			s.size += segs[j].size
			s.large = segs[j].large
			segs = slices.Delete(segs, j, j+1)
		}
		if j > 0 && segs[j-1].expandable && segs[j-1].end() == s.addr && segs[j-1].stream == s.stream {
			segs[j-1].size += s.size
			l.flat = segs
			return
		}
		l.flat = slices.Insert(segs, j, s)
		return
	}
	if ck, c, ok := l.m.Ceil(s.addr); ok && c.expandable && ck == s.end() && c.stream == s.stream {
		s.size += c.size
		s.large = c.large
		l.m.Remove(ck)
	}
	if s.addr > 0 {
		if _, f, ok := l.m.Floor(s.addr - 1); ok && f.expandable && f.end() == s.addr && f.stream == s.stream {
			f.size += s.size
			return
		}
	}
	l.m.Insert(s.addr, s)
}

// cut removes [addr, addr+size) from the range holding addr (undoing
// segment_map, or replaying segment_unmap).
func (l *segList) cut(addr uint64, size int64) {
	if l.isFlat {
		l.cutFlat(addr, size)
		return
	}
	s, ok := l.find(addr)
	if !ok {
		return
	}
	end := addr + uint64(size)
	switch {
	case s.addr == addr && s.end() <= end:
		l.removeStart(addr)
	case s.addr == addr:
		l.removeStart(addr)
		s.size -= size
		s.addr = end
		l.insert(s)
	case s.end() <= end:
		s.size = int64(addr - s.addr)
	default:
		tail := *s
		tail.addr, tail.size = end, int64(s.end()-end)
		s.size = int64(addr - s.addr)
		l.insert(&tail)
	}
}

// cutFlat is cut on the sorted slice, which it changes in place.
func (l *segList) cutFlat(addr uint64, size int64) {
	j := sort.Search(len(l.flat), func(i int) bool { return l.flat[i].end() > addr })
	if j == len(l.flat) || l.flat[j].addr > addr {
		return
	}
	s := l.flat[j]
	end := addr + uint64(size)
	switch {
	case s.addr == addr && s.end() <= end:
		l.flat = slices.Delete(l.flat, j, j+1)
	case s.addr == addr:
		s.size -= size
		s.addr = end
	case s.end() <= end:
		s.size = int64(addr - s.addr)
	default:
		tail := *s
		tail.addr, tail.size = end, int64(s.end()-end)
		s.size = int64(addr - s.addr)
		l.flat = slices.Insert(l.flat, j+1, &tail)
	}
}
