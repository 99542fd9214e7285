package torchsnap

import (
	"unsafe"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// Storage for the two tables that grow with the trace: decoded events and
// the pickle memo. Both are chunked, so growing never copies what is already
// there (a slice grown by append to 2.5M events copies about five times its
// final size and leaves the copies to the garbage collector).

const chunkBits = 15

// cev is a decoded trace entry, stored as the trace.Event it becomes. Its
// Seq is its index in the store, and Device is 0: that is already their
// final value for the events of device 0's trace list when that list is the
// store's first run (nearly every snapshot: one device), so that gatherRun
// has nothing to set; others are set once the trace list they belong to is
// known. Storing the final form lets a device's events be a view of the
// store when its run lies in the store's base (see sizeFor), with no copy.
type cev = trace.Event

type eventStore struct {
	chunks [][]cev
	n      int64
	slab   []cev // the rest of the current slab, cut into chunks as needed
	// base is one allocation sized from the file, from which the first
	// chunks are cut in order, so that the events in it are contiguous: a
	// run of them becomes a device's Events without a copy. Past it (a file
	// with more, or smaller, entries than estimated), or where a chunk had
	// to be replaced, chunks are separate and gatherRun copies.
	base  []cev
	views [][2]int64 // the runs [lo, hi) of base handed out as views
	// offHeap asks sizeFor for a base outside the Go heap (ReadFileMapped);
	// mapped is that memory, given back by release.
	offHeap bool
	mapped  []byte
	// scratch, if not empty, is where sizeFor makes rf, the file the
	// records of a mid-size file's packed events go to (recfile.go);
	// discarded is the end of the mapping's memory given back so far.
	scratch   string
	rf        *recFile
	discarded uintptr
	// packed: events [0, packed) of the base are records now (pack.go);
	// packStop: no more are packed.
	packed   int64
	packStop bool
	// follow, if set (ReadFileMappedFollowed), is handed the events as
	// they are packed.
	follow *storeFollow

	// sp, when set (Open), receives the events instead of chunks: nothing
	// above is used, and chunks below relChunks count as released.
	sp        *spill
	relChunks int64
	tmp       cev // get's copy of a spilled event
}

// newMemoPair makes a chunk's arrays, each touched once a page (a write:
// reading a fresh page would map the zero page), for the memo to take
// from made.
func newMemoPair() memoPair {
	p := memoPair{make([]vkind, memoChunk), make([]int32, memoChunk)}
	for i := 0; i < memoChunk; i += 4096 {
		p.k[i] = 0
	}
	for i := 0; i < memoChunk; i += 1024 {
		p.v[i] = 0
	}
	return memoPair{p.k[:0], p.v[:0]}
}

// sizeFor sizes the store's base for a file of size bytes. A trace entry
// takes 60 to 90 bytes of pickle (PyTorch's own snapshots; at least about
// 53 with the keys it writes), so a base of size/48 events holds them all
// for nearly any snapshot, and what it holds beyond the events is never
// touched: in a fresh heap it costs address space, not memory.
func (s *eventStore) sizeFor(size int64) {
	if n := size / 48; n >= 256 {
		if s.offHeap {
			if s.base, s.mapped = mapEvents(n); s.base != nil {
				if s.scratch != "" && size <= ScratchMax {
					// Where it cannot be made, the records stay in the
					// mapping, as a larger file's do.
					s.rf, _ = newRecFile(s.scratch)
				}
				return
			}
		}
		s.base = make([]cev, n)
		adviseHuge(s.base)
	}
}

// release gives back an off-heap base and closes rf; its events must not
// be used after.
func (s *eventStore) release() {
	s.rf.close()
	s.rf = nil
	if s.mapped != nil {
		unmapEvents(s.mapped)
		s.mapped, s.base, s.chunks = nil, nil, nil
	}
}

// inBase reports whether events [lo, lo+n) all lie in chunks cut from the
// base, where they are contiguous, and no other view overlaps them, and
// returns them as a view of their own.
func (s *eventStore) inBase(lo, n int64) ([]cev, bool) {
	const size = 1 << chunkBits
	if n == 0 || lo+n > int64(len(s.base)) {
		return nil, false
	}
	for _, v := range s.views {
		if lo < v[1] && v[0] < lo+n {
			return nil, false // a malformed file's runs overlap: copy
		}
	}
	for c := lo >> chunkBits; c <= (lo+n-1)>>chunkBits; c++ {
		if !s.fromBase(c) {
			return nil, false
		}
	}
	s.views = append(s.views, [2]int64{lo, lo + n})
	return s.base[lo : lo+n : lo+n], true
}

// fromBase reports whether chunk c is (still) the one cut from the base.
func (s *eventStore) fromBase(c int64) bool {
	const size = 1 << chunkBits
	ch := s.chunks[c]
	return c*size < int64(len(s.base)) && cap(ch) > 0 && unsafe.SliceData(ch) == &s.base[c*size]
}

// slabChunks: past the first slabChunks chunks (262144 events), chunks are
// cut from slabs of slabChunks chunks (20 MiB) allocated at once, which the
// kernel is asked to back with huge pages: faulting a large file's events
// in 4 KiB pages costs about twice as long. A slab is freed once all its
// chunks are released.
const slabChunks = 8

// add appends *e, setting its Seq where it is stored whole (a pointer: an
// event is 88 bytes, and this runs once per trace entry). Where the spill
// takes it and its buffer has room after it, it is packed there, in code
// small enough to be inlined (spill.add without the call, and no frame for
// the rest, which addMore does).
func (s *eventStore) add(e *cev) int64 {
	if sp := s.sp; sp != nil && len(sp.buf)+1 < cap(sp.buf) {
		n := len(sp.buf)
		sp.buf = sp.buf[:n+1]
		sp.buf[n].pack(e)
		s.n++
		return s.n - 1
	}
	return s.addMore(e)
}

// addMore is add for an event the spill's buffer has no room after, or
// with no spill.
func (s *eventStore) addMore(e *cev) int64 {
	e.Seq = s.n
	if sp := s.sp; sp != nil {
		sp.add(e)
		s.n++
		return s.n - 1
	}
	c := s.n >> chunkBits
	if int(c) == len(s.chunks) {
		s.grow(c)
	}
	s.chunks[c] = append(s.chunks[c], *e)
	s.n++
	return s.n - 1
}

func (s *eventStore) grow(c int64) {
	const size = 1 << chunkBits
	switch {
	case c*size < int64(len(s.base)):
		// The last chunk cut from the base may be short: append moves it
		// out if it fills (its events are then copied, not viewed).
		s.chunks = append(s.chunks, s.base[c*size:c*size:min(int64(len(s.base)), (c+1)*size)])
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
	if s.sp != nil {
		if i>>chunkBits < s.relChunks || s.sp.readAt(unsafeOne(&s.tmp), i) != nil {
			return nil, false
		}
		return &s.tmp, true
	}
	ch := s.chunks[i>>chunkBits]
	if ch == nil {
		return nil, false
	}
	if i < s.packed {
		if s.rf != nil {
			if s.rf.readWide(unsafeOne(&s.tmp), i, i, 0) != nil {
				return nil, false
			}
			return &s.tmp, true
		}
		s.records()[i].widen(&s.tmp, i, 0)
		return &s.tmp, true
	}
	return &ch[i&(1<<chunkBits-1)], true
}

// releaseBelow drops the chunks entirely below event index lo, and returns
// how many bytes they held.
func (s *eventStore) releaseBelow(lo int64) int64 {
	if s.sp != nil {
		s.relChunks = max(s.relChunks, lo>>chunkBits)
		return 0
	}
	var n int64
	for c := int64(0); c < lo>>chunkBits && c < int64(len(s.chunks)); c++ {
		if !s.fromBase(c) { // the base is freed only as a whole
			n += int64(cap(s.chunks[c])) * int64(unsafe.Sizeof(cev{}))
		}
		s.chunks[c] = nil
	}
	return n
}

// released reports whether chunk c was released (or never existed).
func (s *eventStore) released(c int64) bool {
	if s.sp != nil {
		return c < s.relChunks || c<<chunkBits >= s.n
	}
	return c >= int64(len(s.chunks)) || s.chunks[c] == nil
}

func unsafeOne(e *cev) []cev { return unsafe.Slice(e, 1) }

// memo is the pickle memo in struct-of-arrays chunks, 5 bytes a slot (a
// kind and an int32) instead of a value's 16: a snapshot memoizes one to
// three objects per trace entry, and the memo is most of what decoding a
// real snapshot holds besides its events. What the pickle memoizes are
// strings, lists, dicts and tuples, whose ids fit in 32 bits; a value that
// does not fit (a number a hostile pickle memoized) is kept in wide, its
// slot marked vWide. The decoder drops the memo once the pickle is read.
type memo struct {
	k      [][]vkind
	v      [][]int32
	k0     []vkind // k[0] and v[0], one indirection closer: most lookups are of
	v0     []int32 // early slots (dict keys and shared strings)
	n      uint64
	sparse map[uint64]value // indices beyond the dense part (hostile or odd pickles)
	wide   map[uint64]value // values of dense slots marked vWide
	first  int              // capacity of the first chunk; 0: 1024, grown by append
	// rewrites counts stores into slots already filled with anything but
	// a dict (BINPUT of an index used before, which CPython never writes;
	// a dict's slot takes what the dict converts to): the frames lists'
	// spanCache, which refers to frames alone, holds while it does not
	// change.
	rewrites uint64
	// lk and lv are the last chunk's slices in k and v (nil: none), for
	// putFits, whose slots go there: set whenever k and v grow.
	lk *[]vkind
	lv *[]int32
	// made, while blockAhead's workers run, has chunks after the first
	// made and faulted in on another core (blockAhead.prepare).
	made <-chan memoPair
	// off, if not nil, is where put makes the chunks (decodeWith's).
	off *grow.OffHeap
}

// memoPair is a memo chunk's kinds and ints, empty, with room for
// memoChunk slots.
type memoPair struct {
	k []vkind
	v []int32
}

// sizeFor sizes the memo's first chunk for a file of size bytes: a trace
// entry (about 80 bytes) memoizes one to three objects, so a file of a few
// MB fills the first chunk, which is then allocated whole rather than grown
// by append from 1024 slots.
func (m *memo) sizeFor(size int64) {
	m.first = int(min(max(size/40, 1024), memoChunk))
}

const memoChunk = 1 << 16

// slot returns what slot idx (dense) stores for v: its kind and int32, or
// vWide, with v noted in wide.
func (m *memo) slot(idx uint64, v value) (vkind, int32) {
	if int64(int32(v.i)) == v.i && v.k != vWide {
		if m.wide != nil {
			delete(m.wide, idx) // a slot stored again (PUT) may have been wide
		}
		return v.k, int32(v.i)
	}
	if m.wide == nil {
		m.wide = map[uint64]value{}
	}
	m.wide[idx] = v
	return vWide, 0
}

func (m *memo) put(idx uint64, v value) {
	switch {
	case idx < m.n:
		if m.k[idx/memoChunk][idx%memoChunk] != vDict {
			m.rewrites++
		}
		m.k[idx/memoChunk][idx%memoChunk], m.v[idx/memoChunk][idx%memoChunk] = m.slot(idx, v)
	case idx == m.n:
		if idx%memoChunk == 0 {
			var p memoPair
			if len(m.k) > 0 && m.made != nil {
				select {
				case p = <-m.made:
				default:
				}
			}
			if p.k == nil {
				n := memoChunk
				if len(m.k) == 0 {
					n = max(m.first, 1024)
				}
				p = memoPair{makeOff[vkind](m.off, 0, n), makeOff[int32](m.off, 0, n)}
			}
			m.k = append(m.k, p.k)
			m.v = append(m.v, p.v)
			m.lk, m.lv = &m.k[len(m.k)-1], &m.v[len(m.v)-1]
		}
		c := idx / memoChunk
		k, i := m.slot(idx, v)
		m.k[c] = append(m.k[c], k)
		m.v[c] = append(m.v[c], i)
		// Grown by append (the first chunk): no room past memoChunk
		// slots, which putFits would fill.
		if cap(m.k[c]) > memoChunk {
			m.k[c] = m.k[c][:len(m.k[c]):memoChunk]
		}
		if cap(m.v[c]) > memoChunk {
			m.v[c] = m.v[c][:len(m.v[c]):memoChunk]
		}
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

// putFits stores v, then each of vs, in the next slots, as put(m.n, v) for
// each in turn would, if they fit the last chunk's spare capacity (lk, lv)
// and its int32s: flatEvent's slots (a trace entry's, and those memoized in
// it). They are written there and only the chunk's lengths then stored
// (wide, which holds only slots below n, needs no change). It returns
// false, having stored nothing, where they do not fit; putEach then stores
// them, in a call of its own, so that this one calls nothing (no frame, no
// registers saved around a call).
func (m *memo) putFits(v value, vs []value) bool {
	if pk, pv := m.lk, m.lv; pk != nil {
		off := len(*pk)
		end := off + 1 + len(vs)
		if end <= cap(*pk) && end <= cap(*pv) {
			// Within the capacity just checked: written through
			// pointers, without a slice's bounds or a check each.
			kp := unsafe.Add(unsafe.Pointer(unsafe.SliceData(*pk)), off)
			ip := unsafe.Add(unsafe.Pointer(unsafe.SliceData(*pv)), 4*off)
			*(*vkind)(kp), *(*int32)(ip) = v.k, int32(v.i)
			// wide is not 0 if a value does not fit its int32, or is
			// vWide (accumulated without branches on each).
			wide := v.i ^ int64(int32(v.i))
			if v.k == vWide {
				wide = 1
			}
			for j := range vs {
				w := &vs[j]
				*(*vkind)(unsafe.Add(kp, 1+j)), *(*int32)(unsafe.Add(ip, 4+4*j)) = w.k, int32(w.i)
				wide |= w.i ^ int64(int32(w.i))
				if w.k == vWide {
					wide = 1
				}
			}
			if wide == 0 {
				// One slice a statement, each cut from itself: only
				// the lengths are stored (no pointer, no write barrier).
				*pk = (*pk)[:end]
				*pv = (*pv)[:end]
				if m.n < memoChunk {
					m.k0 = m.k0[:end]
					m.v0 = m.v0[:end]
				}
				m.n += uint64(end - off)
				return true
			}
		}
	}
	return false
}

// putEach stores v, then each of vs, in the next slots, one at a time.
//
//go:noinline
func (m *memo) putEach(v value, vs []value) {
	m.put(m.n, v)
	for _, w := range vs {
		m.put(m.n, w)
	}
}

// putRun stores the values of kinds ks and ints vs in the next slots, as
// put(m.n, v) for each in turn would: a run that fits the current chunk's
// spare capacity, and its int32s, is copied there whole (a region commits
// a slot or more per trace entry, convertBlocks two per block).
func (m *memo) putRun(ks []vkind, vs []int64) {
	ks, vs = ks[:min(len(ks), len(vs))], vs[:min(len(ks), len(vs))]
	for len(ks) > 0 {
		c, off := m.n/memoChunk, m.n%memoChunk
		room := 0
		if off != 0 && c < uint64(len(m.k)) && c < uint64(len(m.v)) {
			room = int(min(uint64(cap(m.k[c])), uint64(cap(m.v[c])), memoChunk) - off)
		}
		room = min(room, len(ks))
		for j := range room {
			if int64(int32(vs[j])) != vs[j] || ks[j] == vWide {
				room = j
				break
			}
		}
		if room == 0 {
			m.put(m.n, value{ks[0], vs[0]})
			ks, vs = ks[1:], vs[1:]
			continue
		}
		kc, vc := m.k[c][:off+uint64(room)], m.v[c][:off+uint64(room)]
		copy(kc[off:], ks[:room])
		for j, x := range vs[:room] {
			vc[off+uint64(j)] = int32(x)
		}
		m.k[c], m.v[c] = kc, vc
		if c == 0 {
			m.k0, m.v0 = kc, vc
		}
		m.n += uint64(room)
		ks, vs = ks[room:], vs[room:]
	}
}

func (m *memo) get(idx uint64) (value, bool) {
	if v, ok := m.getDense(idx); ok {
		return v, true
	}
	v, ok := m.sparse[idx]
	return v, ok
}

// getDense is get for flatDict, which stores the slots it memoizes only at
// its end: a slot at or past n (even one in sparse) may be one it has not
// stored yet, so it is not found.
func (m *memo) getDense(idx uint64) (value, bool) {
	var v value
	switch {
	case idx < uint64(len(m.k0)) && idx < uint64(len(m.v0)):
		v = value{m.k0[idx], int64(m.v0[idx])}
	case idx < m.n:
		v = value{m.k[idx/memoChunk][idx%memoChunk], int64(m.v[idx/memoChunk][idx%memoChunk])}
	default:
		return value{}, false
	}
	if v.k == vWide {
		v = m.wide[idx]
	}
	return v, true
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
// order, each within one chunk); each is written with its index in Seq, as
// add sets it.
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
