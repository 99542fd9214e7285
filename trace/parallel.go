package trace

import (
	"encoding/binary"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/tracer-dev/tracer/internal/cputime"
)

// A trace's record batches can be decoded apart: a batch needs only the
// schema and the dictionary deltas before it. Reader.DecodeAhead finds
// where every message of a trace file lies (scanMessages: its headers
// only, the stream's equivalent of an IPC file's footer) and hands the
// record batches round-robin to worker goroutines, each a Reader of its
// own over the schema, every dictionary message before its batches, and
// its batches (the same code, so the same events, errors and stacks). The
// caller's Next and NextTo then take the events in order from the
// workers' chunks. Each worker decodes one batch at a time and stays at
// most aheadChunks chunks ahead of the caller, so the memory is bounded
// by the workers' count: about two record batches' bytes each (Arrow's
// body and its columns, 11 MB at DefaultBatchRows) plus the chunks.

const (
	chunkRows   = 4096 // events in a chunk a worker hands on
	aheadChunks = 4    // chunks a worker may have decoded that the caller did not take
)

// msgSpan is one IPC message of a trace file: its bytes [off, off+n), and
// its type (1 schema, 2 dictionary batch, 3 record batch).
type msgSpan struct {
	off, n int64
	typ    byte
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
		meta = append(meta[:0], make([]byte, mlen)...)
		if _, err := f.ReadAt(meta, off+8); err != nil || verifyMessage(meta) != nil {
			return nil, false
		}
		typ, body, ok := messageHeader(meta)
		if !ok || body < 0 || body%8 != 0 || body > size-off-8-mlen || (typ == 1) != (len(spans) == 0) || typ < 1 || typ > 3 {
			return nil, false
		}
		n := 8 + mlen + body
		spans = append(spans, msgSpan{off, n, typ})
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
	rd      *Reader
	out     chan chunk
	cpu     time.Duration
	decoded int // record batches decoded
}

// DecodeAhead makes the rest of r's events come from workers goroutines
// that decode the trace's record batches in order (see scanMessages), and
// reports whether it did: only a trace opened with Open, not yet read,
// whose messages are well formed, and with workers of at least 2. With
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
	for i, s := range spans {
		if s.typ == 3 {
			recs = append(recs, i)
		}
	}
	if len(recs) < 2 {
		return false
	}
	workers = min(workers, len(recs))
	a := &ahead{free: make(chan []Event, workers*(aheadChunks+1)), stop: make(chan struct{}), batches: len(recs), timed: timed}
	for w := range workers {
		// The worker's stream: the schema, then before each of its
		// batches the dictionary messages it has not read, then the
		// batch; the end-of-stream marker.
		var parts []io.Reader
		var size int64
		add := func(s msgSpan) {
			parts = append(parts, io.NewSectionReader(r.file, s.off, s.n))
			size += s.n
		}
		add(spans[0])
		from := 1
		for b := w; b < len(recs); b += workers {
			for _, s := range spans[from:recs[b]] {
				if s.typ == 2 {
					add(s)
				}
			}
			add(spans[recs[b]])
			from = recs[b] + 1
		}
		parts = append(parts, eosReader())
		size += 8
		rd, err := newReader(r.name, io.MultiReader(parts...), size)
		if err != nil {
			a.close()
			return false
		}
		aw := &aheadWorker{rd: rd, out: make(chan chunk, aheadChunks)}
		a.workers = append(a.workers, aw)
	}
	r.ahead = a
	for w, aw := range a.workers {
		a.wg.Add(1)
		go a.run(aw, w)
	}
	return true
}

func eosReader() io.Reader {
	return io.NewSectionReader(eosBytes{}, 0, 8)
}

type eosBytes struct{}

func (eosBytes) ReadAt(p []byte, off int64) (int, error) {
	eos := [8]byte{0xFF, 0xFF, 0xFF, 0xFF}
	n := copy(p, eos[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
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
	rd := aw.rd
	send := func(c chunk) bool {
		select {
		case aw.out <- c:
			return true
		case <-a.stop:
			return false
		}
	}
	for b := w; b < a.batches; b += len(a.workers) {
		unknown := rd.unknown
		ok := !rd.done && rd.nextBatch()
		aw.decoded++
		for ok && rd.row < rd.rows {
			var evs []Event
			select {
			case evs = <-a.free:
			default:
				evs = make([]Event, chunkRows)
			}
			n := min(chunkRows, rd.rows-rd.row)
			evs = evs[:n]
			for i := range evs {
				rd.fill(&evs[i])
			}
			if !send(chunk{evs: evs, stacks: rd.Stacks()}) {
				return
			}
		}
		end := chunk{end: true, stacks: rd.Stacks(), unknown: rd.unknown - unknown}
		if !ok {
			// The stream ended or failed where the scan saw a batch:
			// what the plain Reader would say there.
			end.err, end.cut = rd.err, rd.cut
			if end.err == nil && !end.cut {
				end.cut = true
			}
		}
		if !send(end) || !ok {
			return
		}
	}
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
		aw.rd.Close()
	}
}

// DecodeCPU stops DecodeAhead's workers and returns their CPU time
// (timed) and how many record batches they decoded: for after the
// events were read.
func (r *Reader) DecodeCPU() (cpu time.Duration, batches int) {
	if r.ahead == nil {
		return 0, 0
	}
	r.ahead.finish()
	for _, aw := range r.ahead.workers {
		cpu += aw.cpu
		batches += aw.decoded
	}
	return cpu, batches
}
