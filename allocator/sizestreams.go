package allocator

import "slices"

// streamIdx finds a sizeSet's streams when it has many: m by stream, and
// ord in order, each key the stream with its index in streams as id.
type streamIdx struct {
	m   map[uint64]*streamBins
	ord kTree
}

// streamsFlat is the most streams a sizeSet finds by a scan (a variable
// only for the test that measures the work of scans alone).
var streamsFlat = 8

// streamRef is a stream and its bins. One slice of them, rather than a
// slice of streams and one of bins, is one allocation less per pool.
type streamRef struct {
	st uint64
	b  *streamBins
}

// stream returns the bins of stream st, or nil.
func (s *sizeSet) stream(st uint64) *streamBins {
	if s.lastB != nil && s.lastSt == st {
		return s.lastB
	}
	if s.idx != nil {
		b := s.idx.m[st]
		if b != nil {
			s.flush() // pend is on the stream found last
			s.lastSt, s.lastB = st, b
		}
		return b
	}
	for i, x := range s.streams {
		if x.st == st {
			addFlatWork(i)
			s.flush()
			s.lastSt, s.lastB = st, x.b
			return x.b
		}
	}
	addFlatWork(len(s.streams))
	return nil
}

// streamIndex is the rank of the first stream ≥ st, in stream order.
func (s *sizeSet) streamIndex(st uint64) int {
	if s.idx != nil {
		return s.idx.ord.lowerRank(freeKey{stream: st})
	}
	i := 0
	for i < len(s.streams) && s.streams[i].st < st {
		i++
	}
	addFlatWork(i)
	return i
}

// ordered is the stream of rank j in stream order.
func (s *sizeSet) ordered(j int) streamRef {
	if s.idx != nil {
		return s.streams[s.idx.ord.at(j).id]
	}
	return s.streams[j]
}

// newStream adds the empty bins of stream st.
func (s *sizeSet) newStream(st uint64) *streamBins {
	var b *streamBins
	if s.streams == nil {
		b, s.streams = &s.own, s.ownRefs[:0]
	} else {
		b = s.slab.streamBins()
	}
	s.flush()
	s.lastSt, s.lastB = st, b
	if s.idx == nil && len(s.streams) < streamsFlat {
		i := s.streamIndex(st)
		addFlatWork(len(s.streams) - i)
		s.streams = slices.Insert(s.streams, i, streamRef{st: st, b: b})
		return b
	}
	if s.idx == nil {
		s.idx = &streamIdx{m: make(map[uint64]*streamBins, 2*streamsFlat)}
		for i, x := range s.streams {
			s.idx.m[x.st] = x.b
			s.idx.ord.insert(freeKey{stream: x.st, id: blockID(i)})
		}
	}
	s.idx.m[st] = b
	s.idx.ord.insert(freeKey{stream: st, id: blockID(len(s.streams))})
	s.streams = append(s.streams, streamRef{st: st, b: b})
	return b
}
