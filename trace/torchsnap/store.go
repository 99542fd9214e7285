package torchsnap

import (
	"unsafe"

	"github.com/tracer-dev/tracer/trace"
)

// Storage for the two tables that grow with the trace: decoded events and
// the pickle memo. Both are chunked, so growing never copies what is already
// there (a slice grown by append to 2.5M events copies about five times its
// final size and leaves the copies to the garbage collector).

const chunkBits = 15

// cev is a decoded trace entry before it knows its device and position:
// 48 bytes instead of trace.Event's 80, while the whole file is decoded.
type cev struct {
	time   int64
	addr   uint64
	size   int64
	stream uint64
	stack  trace.StackID
	pool   int32 // index into builder.pools; 0 is the default pool pair
	kind   trace.Kind
}

type eventStore struct {
	chunks [][]cev
	n      int64
	slab   []cev // the rest of the current slab, cut into chunks as needed
}

// slabChunks: past the first slabChunks chunks (262144 events), chunks are
// cut from slabs of slabChunks chunks (12 MiB) allocated at once, which the
// kernel is asked to back with huge pages: faulting a large file's events
// in 4 KiB pages costs about twice as long. A slab is freed once all its
// chunks are released.
const slabChunks = 8

func (s *eventStore) add(e cev) int64 {
	c := s.n >> chunkBits
	if int(c) == len(s.chunks) {
		s.grow(c)
	}
	s.chunks[c] = append(s.chunks[c], e)
	s.n++
	return s.n - 1
}

func (s *eventStore) grow(c int64) {
	const size = 1 << chunkBits
	switch {
	case c == 0:
		// Start small: most snapshots hold a few thousand events, and
		// append grows the first chunk as needed.
		s.chunks = append(s.chunks, make([]cev, 0, 256))
	case c < slabChunks:
		s.chunks = append(s.chunks, make([]cev, 0, size))
	default:
		if len(s.slab) == 0 {
			s.slab = make([]cev, slabChunks*size)
			adviseHuge(s.slab)
		}
		s.chunks = append(s.chunks, s.slab[:0:size])
		s.slab = s.slab[size:]
	}
}

// get returns event i; ok is false if its chunk was already released.
func (s *eventStore) get(i int64) (*cev, bool) {
	ch := s.chunks[i>>chunkBits]
	if ch == nil {
		return nil, false
	}
	return &ch[i&(1<<chunkBits-1)], true
}

// releaseBelow drops the chunks entirely below event index lo, and returns
// how many bytes they held.
func (s *eventStore) releaseBelow(lo int64) int64 {
	var n int64
	for c := int64(0); c < lo>>chunkBits && c < int64(len(s.chunks)); c++ {
		n += int64(cap(s.chunks[c])) * int64(unsafe.Sizeof(cev{}))
		s.chunks[c] = nil
	}
	return n
}

// memo is the pickle memo in struct-of-arrays chunks (9 bytes a slot instead
// of 16): a snapshot memoizes one to three objects per trace entry. The
// decoder drops it once the pickle is read.
type memo struct {
	k      [][]vkind
	v      [][]int64
	k0     []vkind // k[0] and v[0], one indirection closer: most lookups are of
	v0     []int64 // early slots (dict keys and shared strings)
	n      uint64
	sparse map[uint64]value // indices beyond the dense part (hostile or odd pickles)
}

const memoChunk = 1 << 16

func (m *memo) put(idx uint64, v value) {
	switch {
	case idx < m.n:
		m.k[idx/memoChunk][idx%memoChunk], m.v[idx/memoChunk][idx%memoChunk] = v.k, v.i
	case idx == m.n:
		if idx%memoChunk == 0 {
			n := memoChunk
			if len(m.k) == 0 {
				n = 1024
			}
			m.k = append(m.k, make([]vkind, 0, n))
			m.v = append(m.v, make([]int64, 0, n))
		}
		c := idx / memoChunk
		m.k[c] = append(m.k[c], v.k)
		m.v[c] = append(m.v[c], v.i)
		if c == 0 {
			m.k0, m.v0 = m.k[0], m.v[0]
		}
		m.n++
	default:
		if m.sparse == nil {
			m.sparse = map[uint64]value{}
		}
		m.sparse[idx] = v
	}
}

func (m *memo) get(idx uint64) (value, bool) {
	if idx < uint64(len(m.k0)) && idx < uint64(len(m.v0)) {
		return value{m.k0[idx], m.v0[idx]}, true
	}
	if idx < m.n {
		return value{m.k[idx/memoChunk][idx%memoChunk], m.v[idx/memoChunk][idx%memoChunk]}, true
	}
	v, ok := m.sparse[idx]
	return v, ok
}

// getDense is get for flatDict, which stores the slots it memoizes only at
// its end: a slot at or past n (even one in sparse) may be one it has not
// stored yet, so it is not found.
func (m *memo) getDense(idx uint64) (value, bool) {
	if idx < uint64(len(m.k0)) && idx < uint64(len(m.v0)) {
		return value{m.k0[idx], m.v0[idx]}, true
	}
	if idx < m.n {
		return value{m.k[idx/memoChunk][idx%memoChunk], m.v[idx/memoChunk][idx%memoChunk]}, true
	}
	return value{}, false
}

// fix gives the current chunk its full capacity, so that reservations in it
// never move (a region's workers write into them).
func (s *eventStore) fix() {
	const size = 1 << chunkBits
	c := s.n >> chunkBits
	if c < int64(len(s.chunks)) && cap(s.chunks[c]) < size {
		ch := make([]cev, len(s.chunks[c]), size)
		copy(ch, s.chunks[c])
		s.chunks[c] = ch
	}
}

// reserve adds n events, to be written through the returned slices (in
// order, each within one chunk).
func (s *eventStore) reserve(n int64) [][]cev {
	const size = 1 << chunkBits
	var segs [][]cev
	for n > 0 {
		c := s.n >> chunkBits
		if int(c) == len(s.chunks) {
			s.grow(c)
			if cap(s.chunks[c]) < size {
				s.chunks[c] = make([]cev, 0, size)
			}
		}
		ch := s.chunks[c]
		lo := int64(len(ch))
		k := min(n, size-lo)
		ch = ch[:lo+k]
		s.chunks[c] = ch
		segs = append(segs, ch[lo:lo+k])
		s.n += k
		n -= k
	}
	return segs
}

// truncate drops the events from n on (reserved ones a region did not use);
// the chunks stay, for the next events.
func (s *eventStore) truncate(n int64) {
	if n >= s.n {
		return
	}
	for c := n >> chunkBits; c < int64(len(s.chunks)); c++ {
		lo := int64(0)
		if c == n>>chunkBits {
			lo = n & (1<<chunkBits - 1)
		}
		if s.chunks[c] != nil {
			s.chunks[c] = s.chunks[c][:lo]
		}
	}
	s.n = n
}
