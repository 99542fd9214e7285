package torchsnap

import (
	"errors"
	"unsafe"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// A spill holds a snapshot's decoded events in a temporary file instead of
// memory, for Open: events are appended in order, spillChunk at a time, and
// read back a range at a time by the passes over a device's trace. The file
// is unlinked as soon as it is created, so nothing is left behind whatever
// happens to the process; its pages live in the page cache, which is not
// the process's memory (it is read and written with pread and pwrite, never
// mapped). A record holds no pointers, so a chunk is written and read as
// its raw bytes; the file is private to this process and never outlives it.
//
// Writing a chunk costs about as much as decoding it (the kernel allocates
// and fills page-cache pages), so a goroutine of the spill's own writes
// while the decoder fills the next buffer.
type spill struct {
	recordFile
	buf     []srec // events [flushed, flushed+len(buf)), not yet handed to the writer
	flushed int64  // events handed to the writer
	err     error  // the first write error, once the writer has stopped

	// The writer takes buffers from work and hands each back on free once
	// written; done receives its first error when work is closed. Of the
	// made buffers (spillBuffers at most, of recs records each: made as
	// the decoder finds none free), buf is the decoder's, and the others
	// are on free or being written. work is nil once the writer has
	// stopped.
	work chan spillWrite
	free chan []srec
	done chan error
	made int
	recs int

	// follow, if set, receives the events of each buffer once it is
	// written, on the writer's goroutine, widened into wide (OpenFollowed).
	follow func([]trace.Event)
	wide   []cev

	// off, if not nil, holds the buffers (newSpillOff): its owner
	// releases it once finish has returned, when none is used again.
	off *grow.OffHeap
}

// srec is a spilled event: the fields decoding sets (trace.Event's Seq is
// its index in the spill, and Device, Flags, BlockSize and DeviceUsed are
// never set by decoding), in 56 bytes instead of an event's 88. Every pass
// over a spilled trace reads it whole, and the kernel fills, copies and at
// the end frees its pages: on a real 9.6 MB snapshot, 6 MB rather than 9.6.
type srec struct {
	TimeUs int64
	Addr   uint64
	Size   int64
	Stream uint64
	Pool   trace.PoolID
	Stack  trace.StackID
	Kind   trace.Kind
	_      [3]byte // zero from make, never written: the file's bytes are all set
}

// pack sets r to the fields of e that a record holds.
func (r *srec) pack(e *cev) {
	r.TimeUs, r.Addr, r.Size, r.Stream, r.Pool, r.Stack, r.Kind = e.TimeUs, e.Addr, e.Size, e.Stream, e.Pool, e.Stack, e.Kind
}

// widen sets *e to the event r holds, with Seq seq and Device dev, field
// by field (a composite literal is built on the stack and copied: twice
// the time). e may overlap r (readAt widens in place), but only from
// evSize-recSize bytes into e on (tailRecords): widen writes e's fields
// below that (Seq to Size) before it reads the rest of r, so that fewer
// of r's fields are held at once (all eight, a caller's loop spills).
func (r *srec) widen(e *cev, seq int64, dev int32) {
	t, a, sz, k := r.TimeUs, r.Addr, r.Size, r.Kind
	e.Seq, e.TimeUs, e.Device, e.Kind, e.Addr, e.Size = seq, t, dev, k, a, sz
	st, p, sk := r.Stream, r.Pool, r.Stack
	e.Stream, e.Pool, e.Stack, e.Flags, e.BlockSize, e.DeviceUsed, e.Ref = st, p, sk, 0, 0, 0, 0
}

type spillWrite struct {
	evs []srec
	at  int64 // first event's index
}

// spillBuffers is how many buffers a spill fills and writes in turn, at
// most (it makes them as it needs them: flush). The writer keeps up with
// the decoder on average, but not chunk by chunk (the kernel's page-cache
// allocation, the follower of OpenFollowed, the collector), so the
// decoder gets more than two buffers to fill ahead.
const spillBuffers = 4

// spillChunk is how many events a spill buffers before writing them (56
// KiB), and the size of the ranges the passes over a spilled trace read:
// an import holds about eight such buffers at once (0.5 MB less at 1024
// than at 2048 events, for a few more system calls).
const spillChunk = 1024

const (
	recSize = int64(unsafe.Sizeof(srec{}))
	evSize  = int64(unsafe.Sizeof(cev{}))
)

// spillEntryBytes is fewer bytes of pickle than a trace entry of a
// snapshot takes (a dict of six keys or more, each key a two-byte memo
// reference, and their values), and spillMin the fewest records a spill
// buffers at once.
const (
	spillEntryBytes = 32
	spillMin        = 64
)

// spillRecs is how many records a spill of a file of size bytes (0 if
// unknown) buffers before writing them: spillChunk, or for a file too
// small to hold that many trace entries (spillEntryBytes each), as many
// as it can hold. It bounds no count: a spill whose buffer is full writes
// it and takes the next, so that a file of more entries (one that shares
// them, say) only writes more often.
func spillRecs(size int64) int {
	if size <= 0 {
		return spillChunk
	}
	return int(min(spillChunk, max(spillMin, size/spillEntryBytes)))
}

// newSpill creates a spill in dir (os.TempDir() when empty) for the
// events of a file of size bytes (0 if unknown), which sizes its buffers
// (spillRecs), whose writer hands the events it writes to follow, if not
// nil.
func newSpill(dir string, follow func([]trace.Event), size int64) (*spill, error) {
	return newSpillOff(dir, follow, size, nil)
}

// newSpillOff is newSpill with its buffers, dead once finish returns,
// made in off (decodeOff) when it is not nil.
func newSpillOff(dir string, follow func([]trace.Event), size int64, off *grow.OffHeap) (*spill, error) {
	f, err := createRecordFile(dir, ".tracer-spill-*", "spill file")
	if err != nil {
		return nil, err
	}
	recs := spillRecs(size)
	s := &spill{recordFile: f, buf: makeOff[srec](off, 0, recs), work: make(chan spillWrite, spillBuffers),
		free: make(chan []srec, spillBuffers), done: make(chan error, 1), made: 1, recs: recs, follow: follow, off: off}
	if follow != nil {
		s.wide = makeOff[cev](off, recs, recs)
	}
	go s.writer(s.work, s.free, s.done)
	return s, nil
}

// writer writes the buffers handed to it in order, and reports its first
// error once work is closed; after an error it only hands buffers back.
func (s *spill) writer(work <-chan spillWrite, free chan<- []srec, done chan<- error) {
	var err error
	for w := range work {
		if err == nil {
			if err = s.writeRecs(w.evs, w.at); err == nil && s.follow != nil {
				wide := s.wide[:len(w.evs)]
				for j := range w.evs {
					w.evs[j].widen(&wide[j], w.at+int64(j), 0)
				}
				s.follow(wide)
			}
		}
		free <- w.evs[:0]
	}
	done <- err
}

func recBytes(rs []srec) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(rs))), int64(len(rs))*recSize)
}

// add appends e, which is event n of the spill.
func (s *spill) add(e *cev) {
	n := len(s.buf)
	if n < cap(s.buf) {
		s.buf = s.buf[:n+1] // flushed as it fills, while the writer runs
	} else {
		s.buf = append(s.buf, srec{})
	}
	s.buf[n].pack(e)
	if n+1 == cap(s.buf) {
		s.flush()
	}
}

// flush hands the buffered events to the writer and takes another buffer:
// a free one, or a new one while fewer than spillBuffers are made (a
// spill of fewer chunks than that makes no more than it fills).
func (s *spill) flush() {
	if !s.hand() {
		return
	}
	if s.made < spillBuffers {
		select {
		case s.buf = <-s.free:
		default:
			s.buf = makeOff[srec](s.off, 0, s.recs)
			s.made++
		}
		return
	}
	s.buf = <-s.free
}

// hand hands the buffered events, if any, to the writer, and reports
// whether it did.
func (s *spill) hand() bool {
	if len(s.buf) == 0 || s.work == nil {
		return false
	}
	s.work <- spillWrite{s.buf, s.flushed}
	s.flushed += int64(len(s.buf))
	return true
}

// wait returns once everything handed to the writer is written: when every
// buffer made but the decoder's is back.
func (s *spill) wait() {
	var back [spillBuffers - 1][]srec
	n := s.made - 1
	for i := range n {
		back[i] = <-s.free
	}
	for _, b := range back[:n] {
		s.free <- b
	}
}

// finish writes what is buffered, stops the writer and frees the buffers:
// from then on the events are read from the file only.
func (s *spill) finish() error {
	if s.work == nil {
		return s.err
	}
	s.hand() // the last buffer: no other taken
	close(s.work)
	s.work = nil
	s.err = <-s.done
	s.buf, s.free, s.wide = nil, nil, nil
	return s.err
}

// readAt fills dst with events [lo, lo+len(dst)), each with its index as
// its Seq.
func (s *spill) readAt(dst []cev, lo int64) error { return s.readAs(dst, lo, lo, 0) }

// readAs is readAt that gives the events Seq seq0, seq0+1, … and Device
// dev. Passes read the spill on several goroutines at once, so its buffer
// for the records is the caller's dst: a record is smaller than an event,
// and the records read into dst's tail are widened from the front, each
// event written below the records still to be read.
func (s *spill) readAs(dst []cev, lo, seq0 int64, dev int32) error {
	if s.work != nil {
		s.wait() // while decoding (gather, for a list that is not a run)
	}
	inFile := min(int64(len(dst)), max(0, s.flushed-lo))
	if err := s.readWide(dst[:inFile], lo, seq0, dev); err != nil {
		return err
	}
	if rest := dst[inFile:]; len(rest) > 0 {
		off := lo + inFile - s.flushed
		if off < 0 || off+int64(len(rest)) > int64(len(s.buf)) {
			return errors.New("spill file: read past the end")
		}
		for j := range rest {
			s.buf[off+int64(j)].widen(&rest[j], seq0+inFile+int64(j), dev)
		}
	}
	return nil
}

// tailRecords returns len(evs) records laid over the end of evs's memory.
// Of n, record j+1 starts at n*(evSize-recSize) + (j+1)*recSize, which is
// at or above (j+1)*evSize, where event j ends, since j+1 <= n.
func tailRecords(evs []cev) []srec {
	n := int64(len(evs))
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(evs))), n*evSize)
	return unsafe.Slice((*srec)(unsafe.Pointer(&b[n*(evSize-recSize)])), n)
}

func (s *spill) close() {
	if s != nil && s.work != nil {
		s.finish()
	}
	if s != nil {
		s.closeFile()
	}
}

// A record must be smaller than an event (readAt widens in place) and
// a multiple of 8 bytes (records stay aligned in an event buffer).
var _ [evSize - recSize - 1]struct{}
var _ [-(recSize % 8)]struct{}

// widen writes an event's fields up to Size before it has read all of its
// record: they lie below the record's start in an event buffer.
var _ [evSize - recSize - int64(unsafe.Offsetof(cev{}.Size)) - 8]struct{}

// makeOff is make([]E, n, c), made in off when it is not nil: the
// decode's buffers and tables, in pages of 4 KiB (grow.MakeOff).
func makeOff[E any](off *grow.OffHeap, n, c int) []E {
	return grow.MakeOff[E](off, n, c, grow.NoHuge)
}
