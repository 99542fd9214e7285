package trace

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/tracer-dev/tracer/internal/cputime"
)

// A trace's record batches can be decoded apart: a batch needs only the
// schema and the dictionary deltas before it. Reader.DecodeAhead finds
// where every message of a trace file lies (scanMessages: its headers
// only, the stream's equivalent of an IPC file's footer) and hands the
// record batches round-robin to worker goroutines. A worker keeps the
// dictionaries with a Reader of its own over the schema and every
// dictionary message, each batch of its own replaced by one of no rows
// (so its action kinds and stack table are the plain Reader's at that
// batch), and reads the batch's columns from the file a chunk of rows at
// a time, straight into the events (batchCols): no copy of the batch is
// held, so a worker's memory is a few chunks. A batch whose layout or
// values are not what this package writes is decoded as the plain Reader
// does, by a Reader over the schema, the dictionaries before it and the
// batch, whose events or error are then the plain Reader's. The caller's
// Next and NextTo take the events in order from the workers' chunks; a
// worker stays at most aheadChunks chunks ahead of them.

const (
	chunkRows   = 4096 // events in a chunk a worker hands on
	aheadChunks = 4    // chunks a worker may have decoded that the caller did not take
	// maxDictShare: DecodeAhead declines a trace whose dictionary
	// messages are more than this fraction of its bytes.
	maxDictShare = 8
)

// msgSpan is one IPC message of a trace file: its bytes [off, off+n), its
// type (1 schema, 2 dictionary batch, 3 record batch), and for a record
// batch its metadata.
type msgSpan struct {
	off, n int64
	typ    byte
	meta   []byte
}

// scanMessages walks the messages of the trace file f (size bytes) by
// their headers, reading no body, and returns them, or false where the
// file is not a well-formed stream that ends with its end-of-stream
// marker (a cut, a corrupt or foreign layout): such a file is read by
// one Reader from the start, whose errors say what is wrong.
func scanMessages(f io.ReaderAt, size int64) ([]msgSpan, bool) {
	var spans []msgSpan
	var hdr [8]byte
	var meta []byte
	for off := int64(0); ; {
		if off+8 > size {
			return nil, false
		}
		if _, err := f.ReadAt(hdr[:], off); err != nil {
			return nil, false
		}
		if binary.LittleEndian.Uint32(hdr[:4]) != 0xFFFFFFFF {
			return nil, false // legacy framing: not this package's writer
		}
		mlen := int64(binary.LittleEndian.Uint32(hdr[4:]))
		if mlen == 0 {
			if off+8 != size || len(spans) < 2 || spans[0].typ != 1 {
				return nil, false
			}
			return spans, true
		}
		if mlen%8 != 0 || mlen > size-off-8 {
			return nil, false
		}
		meta = growTo(meta, int(mlen))
		if _, err := f.ReadAt(meta, off+8); err != nil || verifyMessage(meta) != nil {
			return nil, false
		}
		typ, body, ok := messageHeader(meta)
		if !ok || body < 0 || body%8 != 0 || body > size-off-8-mlen || (typ == 1) != (len(spans) == 0) || typ < 1 || typ > 3 {
			return nil, false
		}
		n := 8 + mlen + body
		sp := msgSpan{off: off, n: n, typ: typ}
		if typ == 3 {
			sp.meta = meta
			meta = nil
		}
		spans = append(spans, sp)
		off += n
	}
}

// messageHeader returns a verified message's header type and body length
// (each 0 when absent, as flatbuffers default them).
func messageHeader(meta []byte) (typ byte, body int64, ok bool) {
	b := fbuf(meta)
	root, _ := b.u32(0)
	msg := int(root)
	typPos, ok1 := b.field(msg, 1)
	lenPos, ok2 := b.field(msg, 3)
	if !ok1 || !ok2 || typPos >= len(b) || lenPos+8 > len(b) {
		return 0, 0, false
	}
	if typPos >= 0 {
		typ = b[typPos]
	}
	if lenPos >= 0 {
		body = int64(binary.LittleEndian.Uint64(b[lenPos:]))
	}
	return typ, body, true
}

// chunk is a run of decoded events of one record batch, and the stack
// table as of that batch. The last chunk of a batch (end) has no events
// and carries the batch's unknown actions and the worker's error, if
// decoding it failed.
type chunk struct {
	evs     []Event
	end     bool
	stacks  []Stack
	unknown int64
	err     error
	cut     bool
}

// ahead is the state of a Reader whose batches are decoded by workers.
type ahead struct {
	workers []*aheadWorker
	free    chan []Event
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	batches int // record batches in the file
	next    int // the batch the caller reads
	cur     chunk
	i       int
	timed   bool
}

type aheadWorker struct {
	dicts   *Reader // the dictionaries, as of each of its batches
	file    *os.File
	name    string
	size    int64 // the file's
	spans   []msgSpan
	recs    []int // the spans' indices of the record batches
	out     chan chunk
	cpu     time.Duration
	decoded int // record batches decoded
	plain   int // of which as the plain Reader does
	cols    batchCols
}

// DecodeAhead makes the rest of r's events come from workers goroutines
// that decode the trace's record batches in order (see scanMessages), and
// reports whether it did: only a trace opened with Open, not yet read,
// whose messages are well formed, in the schema this package writes, with
// dictionaries under 1/maxDictShare of the file, and with workers of at
// least 2. With
// timed, each worker measures its thread's CPU time (DecodeCPU). The
// events, stacks, errors and Truncated are those of the plain Reader.
func (r *Reader) DecodeAhead(workers int, timed bool) bool {
	if workers < 2 || r.file == nil || r.ahead != nil || r.rows > 0 || r.done {
		return false
	}
	st, err := r.file.Stat()
	if err != nil {
		return false
	}
	spans, ok := scanMessages(r.file, st.Size())
	if !ok {
		return false
	}
	var recs []int // the spans' indices of the record batches
	var dictBytes int64
	for i, s := range spans {
		switch s.typ {
		case 2:
			dictBytes += s.n
		case 3:
			recs = append(recs, i)
		}
	}
	// Every worker reads every dictionary and keeps a stack table: where
	// the dictionaries are much of the file (many distinct stacks), one
	// Reader does.
	if len(recs) < 2 || dictBytes > st.Size()/maxDictShare {
		return false
	}
	if !exactSchema(r.ipc.Schema()) {
		return false
	}
	rb, ok := noRowsBatch()
	if !ok {
		return false
	}
	workers = min(workers, len(recs))
	a := &ahead{free: make(chan []Event, workers*(aheadChunks+1)), stop: make(chan struct{}), batches: len(recs), timed: timed}
	for w := range workers {
		// The dictionaries' stream: the schema, then before each of the
		// worker's batches the dictionary messages it has not read and a
		// batch of no rows; the end-of-stream marker.
		var parts []io.Reader
		parts = append(parts, io.NewSectionReader(r.file, spans[0].off, spans[0].n))
		from := 1
		for b := w; b < len(recs); b += workers {
			for _, s := range spans[from:recs[b]] {
				if s.typ == 2 {
					parts = append(parts, io.NewSectionReader(r.file, s.off, s.n))
				}
			}
			parts = append(parts, bytes.NewReader(rb))
			from = recs[b] + 1
		}
		parts = append(parts, bytes.NewReader(eos[:]))
		rd, err := newReader(r.name, io.MultiReader(parts...), st.Size())
		if err != nil {
			a.close()
			return false
		}
		rd.dictsOnly = true
		a.workers = append(a.workers, &aheadWorker{dicts: rd, file: r.file, size: st.Size(), name: r.name, spans: spans, recs: recs, out: make(chan chunk, aheadChunks)})
	}
	r.ahead = a
	for w, aw := range a.workers {
		a.wg.Add(1)
		go a.run(aw, w)
	}
	return true
}

// eos is the end-of-stream marker.
var eos = [8]byte{0xFF, 0xFF, 0xFF, 0xFF}

// plainReader returns a Reader over the schema, the dictionary messages
// before record batch b, and b: what the plain Reader decodes b with. Its
// size is the file's, which bounds what it allocates as the plain
// Reader's is bounded.
func (aw *aheadWorker) plainReader(b int) (*Reader, error) {
	var parts []io.Reader
	for i, s := range aw.spans[:aw.recs[b]+1] {
		if s.typ != 3 || i == aw.recs[b] {
			parts = append(parts, io.NewSectionReader(aw.file, s.off, s.n))
		}
	}
	parts = append(parts, bytes.NewReader(eos[:]))
	return newReader(aw.name, io.MultiReader(parts...), aw.size)
}

// run decodes worker w's batches (w, w+k, ...) into chunks.
func (a *ahead) run(aw *aheadWorker, w int) {
	defer a.wg.Done()
	var start time.Duration
	if a.timed {
		runtime.LockOSThread()
		start = cputime.Thread()
		defer func() { aw.cpu = cputime.Thread() - start; runtime.UnlockOSThread() }()
	}
	send := func(c chunk) bool {
		select {
		case aw.out <- c:
			return true
		case <-a.stop:
			return false
		}
	}
	get := func() []Event {
		select {
		case evs := <-a.free:
			return evs
		default:
			return make([]Event, chunkRows)
		}
	}
	dicts := aw.dicts
	for b := w; b < a.batches; b += len(a.workers) {
		aw.decoded++
		sp := aw.spans[aw.recs[b]]
		unknown := dicts.unknown
		if !dicts.done && dicts.nextBatch() && aw.cols.bind(aw.file, sp, dicts) {
			stacks := dicts.Stacks()
			for lo := 0; lo < aw.cols.rows; lo += chunkRows {
				evs := get()[:min(chunkRows, aw.cols.rows-lo)]
				aw.cols.start(lo, evs)
				if !aw.cols.read(aw.file, lo, evs) {
					break
				}
				if !send(chunk{evs: evs, stacks: stacks}) {
					return
				}
			}
			if aw.cols.err == nil {
				if !send(chunk{end: true, stacks: stacks, unknown: dicts.unknown - unknown}) {
					return
				}
				continue
			}
			// Values the plain Reader refuses: it says why, after
			// the rows before them, which were served.
		}
		if !aw.plainBatch(b, send, get) {
			return
		}
	}
}

// plainBatch decodes record batch b as the plain Reader does, skipping
// the rows aw.cols served of it, and reports whether to go on.
func (aw *aheadWorker) plainBatch(b int, send func(chunk) bool, get func() []Event) bool {
	aw.plain++
	skip := aw.cols.served
	rd, err := aw.plainReader(b)
	end := chunk{end: true}
	if err != nil {
		end.err = err
		return send(end) && false
	}
	defer rd.Close()
	ok := rd.nextBatch()
	rd.row = min(skip, rd.rows)
	for ok && rd.row < rd.rows {
		evs := get()[:min(chunkRows, rd.rows-rd.row)]
		for i := range evs {
			rd.fill(&evs[i])
		}
		if !send(chunk{evs: evs, stacks: rd.Stacks()}) {
			return false
		}
	}
	end.stacks, end.unknown = rd.Stacks(), rd.unknown
	if !ok {
		// The stream failed where the scan saw a batch: what the
		// plain Reader says there.
		end.err, end.cut = rd.err, rd.cut
		if end.err == nil && !end.cut {
			end.cut = true
		}
	}
	return send(end) && ok
}

// ReadEvents decodes the next events into dst, as many as there are up to
// len(dst), and returns how many: 0 at the end of the trace or on error
// (see Err). With workers (DecodeAhead) it copies runs of their chunks.
func (r *Reader) ReadEvents(dst []Event) int {
	a := r.ahead
	if a == nil {
		n := 0
		for n < len(dst) && r.NextTo(&dst[n]) {
			n++
		}
		return n
	}
	n := 0
	for n < len(dst) && !r.done {
		if a.i >= len(a.cur.evs) {
			// The next chunk, through nextAhead, which takes one event.
			if !r.nextAhead(&dst[n]) {
				break
			}
			n++
		}
		k := copy(dst[n:], a.cur.evs[a.i:])
		a.i += k
		n += k
	}
	return n
}

// nextAhead is NextTo for a Reader with workers.
func (r *Reader) nextAhead(e *Event) bool {
	a := r.ahead
	for a.i >= len(a.cur.evs) {
		if a.cur.evs != nil {
			select {
			case a.free <- a.cur.evs[:cap(a.cur.evs)]:
			default:
			}
			a.cur.evs = nil
		}
		if a.next >= a.batches {
			r.done = true
			return false
		}
		c := <-a.workers[a.next%len(a.workers)].out
		a.i = 0
		if c.end {
			r.stacks = c.stacks
			r.unknown += c.unknown
			a.next++
			if c.err != nil || c.cut {
				r.done, r.cut = true, c.cut
				if c.err != nil {
					r.fail(c.err)
				}
				a.next = a.batches
				return false
			}
			continue
		}
		a.cur = c
		r.stacks = c.stacks
	}
	*e = a.cur.evs[a.i]
	a.i++
	return true
}

// finish stops the workers, if they still run, and waits for them.
func (a *ahead) finish() {
	a.once.Do(func() { close(a.stop) })
	a.wg.Wait()
}

// close finishes the workers and closes their readers.
func (a *ahead) close() {
	a.finish()
	for _, aw := range a.workers {
		aw.dicts.Close()
	}
}

// DecodeCPU stops DecodeAhead's workers and returns their CPU time
// (timed), how many record batches they decoded, and how many of those
// as the plain Reader does (batchCols took the rest): for after the
// events were read.
func (r *Reader) DecodeCPU() (cpu time.Duration, batches, plain int) {
	if r.ahead == nil {
		return 0, 0, 0
	}
	r.ahead.finish()
	for _, aw := range r.ahead.workers {
		cpu += aw.cpu
		batches += aw.decoded
		plain += aw.plain
	}
	return cpu, batches, plain
}
