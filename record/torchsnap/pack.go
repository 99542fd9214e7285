package torchsnap

import (
	"sync/atomic"
	"unsafe"
)

// Packing: ReadFileMapped's events are kept as records (srec, 56 bytes:
// what the spill stores) rather than in their final form (trace.Event, 96
// bytes): in the store's mapping, record i at 56i, below event i at 96i,
// or in ReadFileMappedIn's scratch file. The regions' workers write their
// chunks' events as records into buffers of the region (reserve), which
// the packer stores once committed; events the sequential machine added
// to the base are rewritten as records once a prefix of them is final,
// and the pages between the records' end and the first event not yet
// packed go back to the system. A device whose run lies in the packed
// prefix reads it through Chunk, widened a chunk at a time, as a spilled
// one does.

// packTo packs events [s.packed, hi) of the base, which must be final and
// lie in chunks cut from the base (checked by the caller), and gives back
// the whole granules between the records' end and event hi's start. Record
// i ends at or below event i+1's start, so packing in order never writes
// over an event not yet packed.
func (s *eventStore) packTo(hi int64) {
	if s.mapped == nil || hi <= s.packed || hi > int64(len(s.base)) {
		return
	}
	g := discardGrain(s.mapped)
	if s.rf != nil {
		// The records go to the scratch file, and every whole granule
		// below event hi goes back: all of it is packed events.
		if err := s.rf.write(s.base[s.packed:hi], s.packed); err != nil {
			// The events stay where they are, unpacked from here on.
			s.packStop = true
			return
		}
		s.follow.events(s.base[s.packed:hi], s.packed)
		s.packed = hi
		if end := (uintptr(hi) * uintptr(evSize)) &^ (g - 1); end > s.discarded {
			discardEvents(s.mapped[s.discarded:end])
			s.discarded = end
		}
		return
	}
	recs := s.records()
	for i := s.packed; i < hi; i++ {
		e := &s.base[i]
		t, a, sz, st, p, sk, k := e.TimeUs, e.Addr, e.Size, e.Stream, e.Pool, e.Stack, e.Kind
		r := &recs[i]
		r.TimeUs, r.Addr, r.Size, r.Stream, r.Pool, r.Stack, r.Kind = t, a, sz, st, p, sk, k
	}
	s.follow.recs(recs[s.packed:hi], s.packed)
	s.packed = hi
	lo := (uintptr(hi)*uintptr(recSize) + g - 1) &^ (g - 1)
	end := (uintptr(hi) * uintptr(evSize)) &^ (g - 1)
	if end > lo {
		discardEvents(s.mapped[lo:end])
	}
}

// packAll packs the events added so far that lie in chunks still cut from
// the base, up to the first that does not; last says decoding has ended,
// and nothing is packed after. The regions' workers must not be running.
func (s *eventStore) packAll(last bool) {
	if s.mapped == nil || s.packStop {
		return
	}
	hi := min(s.n, int64(len(s.base)))
	for c := s.packed >> chunkBits; c<<chunkBits < hi; c++ {
		if c >= int64(len(s.chunks)) || !s.fromBase(c) {
			hi = c << chunkBits
			break
		}
	}
	if hi > s.packed {
		s.packTo(hi)
	}
	s.packStop = s.packStop || last || hi < min(s.n, int64(len(s.base))) // packTo may stop it
}

// records returns the mapping as records, record i at 56i.
func (s *eventStore) records() []srec {
	return unsafe.Slice((*srec)(unsafe.Pointer(unsafe.SliceData(s.mapped))), int64(len(s.mapped))/recSize)
}

// baseAt reports whether dst, a chunk's reserved events from index lo on,
// lies in the base at those indexes.
func (s *eventStore) baseAt(dst [][]cev, lo int64) bool {
	for _, seg := range dst {
		if len(seg) == 0 {
			continue
		}
		if lo+int64(len(seg)) > int64(len(s.base)) || unsafe.SliceData(seg) != &s.base[lo] {
			return false
		}
		lo += int64(len(seg))
	}
	return true
}

// regionPacked counts the events packed by regions' packers, as they
// decode (for tests).
var regionPacked atomic.Int64

// packJob is a committed chunk's events [lo, hi), final once fixed is
// closed; ok is false where they do not lie in the base. recs, if not nil,
// holds them as records (the chunk's workers wrote them there, not in the
// base: recChunk), to be given back to free once written.
type packJob struct {
	lo, hi int64
	ok     bool
	fixed  <-chan struct{}
	recs   []srec
	free   chan []srec
}

// packer packs the region's committed chunks in order as their stack ids
// are fixed, while the workers decode the next ones; it stops for good at
// the first chunk it cannot pack (outside the base, or after a gap). A
// chunk of records it cannot pack is widened into the base, where its
// events then are as an unpacked chunk's.
func (s *eventStore) packer(jobs <-chan packJob, done chan<- struct{}) {
	for j := range jobs {
		<-j.fixed
		lo := s.packed
		if s.packStop || !j.ok || j.lo != s.packed || j.recs != nil && !s.packRecs(j.recs, j.lo) {
			s.packStop = true
			if j.recs != nil {
				widenRecs(s.base[j.lo:j.hi], j.recs, j.lo, 0)
			}
		} else {
			regionPacked.Add(j.hi - lo)
			if j.recs == nil {
				s.packTo(j.hi)
			}
		}
		if j.recs != nil {
			select {
			case j.free <- j.recs:
			default:
			}
		}
	}
	close(done)
}

// packRecs stores recs as the records of events [lo, lo+len(recs)), lo
// being s.packed: in the scratch file, or in the mapping, record i at
// 56i (event lo's memory and above was never written: recChunk). It
// reports false where the file could not be written.
func (s *eventStore) packRecs(recs []srec, lo int64) bool {
	hi := lo + int64(len(recs))
	if s.rf != nil {
		if s.rf.writeRecs(recs, lo) != nil {
			return false
		}
	} else {
		copy(s.records()[lo:hi], recs)
	}
	s.follow.recs(recs, lo)
	s.packed = hi
	return true
}

// widenRecs widens recs into dst (as many as both hold), with Seq seq0,
// seq0+1, … and Device dev.
func widenRecs(dst []cev, recs []srec, seq0 int64, dev int32) {
	for j := range min(len(dst), len(recs)) {
		recs[j].widen(&dst[j], seq0+int64(j), dev)
	}
}

// reserve reserves chunk c's events in the store. Where the region's
// events are packed as they are committed (packq) and c's lie in the
// base, its workers write them as records into a buffer that the packer
// gives back for a later chunk (recChunk), and the base's memory of those
// events is never written: a fresh page for each 42 events (96 bytes
// each) cost more than decoding them (page faults, and the kernel's
// zeroing), and the packer then read them back to pack them.
func (r *region) reserve(c *chunk) {
	c.dst = r.b.events.reserve(int64(c.entries))
	c.recs = nil
	if r.packq != nil && c.entries > 0 && r.b.events.baseAt(c.dst, c.firstEvent) {
		c.recs = r.recChunk(c.entries)
	}
}

// recChunk returns a records buffer of n, a used one where one is free
// and large enough. The buffers are mapped outside the Go heap, as the
// store's base is: on the heap, the few MiB of them in use would raise
// the collector's goal by several times as much (the decode runs at GOGC
// 400), and the decode's peak with it. Each is given back by freeRecs, or
// at the region's end (unmapRecChunks).
func (r *region) recChunk(n int) []srec {
	select {
	case b := <-r.recFree:
		if cap(b) >= n {
			return b[:n]
		}
		r.unmapRec(b)
	default:
	}
	b := mapRecs(n + n/4)
	if b == nil {
		return make([]srec, n, n+n/4)
	}
	r.recMu.Lock()
	r.recMaps[unsafe.SliceData(b)] = b
	r.recMu.Unlock()
	return b[:n]
}

// unmapRec gives buffer b back to the system, if it was mapped.
func (r *region) unmapRec(b []srec) {
	r.recMu.Lock()
	m, ok := r.recMaps[unsafe.SliceData(b)]
	delete(r.recMaps, unsafe.SliceData(b))
	r.recMu.Unlock()
	if ok {
		unmapRecs(m)
	}
}

// unmapRecChunks gives back every mapped records buffer; the walker, the
// workers and the packer have ended.
func (r *region) unmapRecChunks() {
	for _, m := range r.recMaps {
		unmapRecs(m)
	}
	clear(r.recMaps)
}

// freeRecs gives chunk c's records buffer back, where the packer will not.
func (r *region) freeRecs(c *chunk) {
	if c.recs != nil {
		select {
		case r.recFree <- c.recs:
		default:
			r.unmapRec(c.recs)
		}
		c.recs = nil
	}
}

// regionBaseBytes counts the bytes of events regions' workers wrote into
// the event store (for tests): none where their records are packed as
// they are committed.
var regionBaseBytes atomic.Int64
