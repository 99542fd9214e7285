package view

import "github.com/tracer-dev/tracer/analysis"

// numSeries are the byte series the timeline draws, in seriesNames order.
const numSeries = 4

var seriesNames = [numSeries]string{"allocated", "reserved", "active", "requested"}

func levelsOf(l analysis.Levels) [numSeries]int64 {
	return [numSeries]int64{l.Allocated, l.Reserved, l.Active, l.Requested}
}

// span is the minimum and maximum of each series over a run of events, and
// the first event that reached each maximum.
type span struct {
	lo, hi [numSeries]int64
	hiAt   [numSeries]int64
	first  int64 // -1: empty
}

func emptySpan() span { return span{first: -1} }

func (s *span) add(o *span) {
	if o.first < 0 {
		return
	}
	if s.first < 0 {
		*s = *o
		return
	}
	for k := range numSeries {
		s.lo[k] = min(s.lo[k], o.lo[k])
		if o.hi[k] > s.hi[k] {
			s.hi[k], s.hiAt[k] = o.hi[k], o.hiAt[k]
		}
	}
}

// The pyramid's leaves hold leafEvents events; each level above merges
// fanout buckets of the one below.
const (
	leafEvents = 16
	fanout     = 4
)

// pyramid keeps the min/max spans of the series over buckets of
// leafEvents·fanout^k events, for every level k: any run of whole leaves
// is the merge of O(levels·fanout) buckets, so a column of the timeline
// costs the same whether it covers 16 events or ten million, and its
// maximum is exact (a peak is never lost). Memory: about 6 bytes per event.
type pyramid struct {
	levels [][]span
}

// set records the values after event i; events come in order.
func (p *pyramid) set(i int64, l analysis.Levels) {
	v := levelsOf(l)
	leaf := &p.levels[0]
	if i%leafEvents == 0 {
		*leaf = append(*leaf, span{lo: v, hi: v, first: i})
		for k := range numSeries {
			(*leaf)[len(*leaf)-1].hiAt[k] = i
		}
		return
	}
	s := &(*leaf)[len(*leaf)-1]
	for k := range numSeries {
		s.lo[k] = min(s.lo[k], v[k])
		if v[k] > s.hi[k] {
			s.hi[k], s.hiAt[k] = v[k], i
		}
	}
}

// finish builds the levels above the leaves.
func (p *pyramid) finish() {
	for below := p.levels[0]; len(below) > 1; below = p.levels[len(p.levels)-1] {
		up := make([]span, (len(below)+fanout-1)/fanout)
		for j := range up {
			up[j] = emptySpan()
			for _, s := range below[j*fanout : min((j+1)*fanout, len(below))] {
				up[j].add(&s)
			}
		}
		p.levels = append(p.levels, up)
	}
}

// reduce returns the span of the leaves [a, b) (leaf indexes): greedily the
// largest aligned bucket that fits, at most 2·(fanout−1) per level.
func (p *pyramid) reduce(a, b int64) span {
	out := emptySpan()
	for a < b {
		k, size := 0, int64(1)
		for k+1 < len(p.levels) && a%(size*fanout) == 0 && a+size*fanout <= b {
			k, size = k+1, size*fanout
		}
		if j := a / size; j < int64(len(p.levels[k])) {
			out.add(&p.levels[k][j])
		}
		a += size
	}
	return out
}
