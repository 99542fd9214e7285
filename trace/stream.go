package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/tracer-dev/tracer/internal/outfile"
)

// StreamWriter writes a trace whose length, and the number of events
// without a stack in each record batch, are known before the first event:
// the bytes are those a Writer from Create writes for the same events (same
// batches, same dictionaries, same metadata), but a batch is never held in
// memory. An Arrow record batch is laid out column by column, and every
// buffer's length follows from the batch's row count and its null counts
// (only the stack column has nulls), so the message header of a batch is
// written as soon as it starts, and the body's space is reserved behind
// it; events then go, a piece of streamPiece rows at a time, straight to
// their place in each column with positioned writes (pwrite). What a batch
// costs in memory is two pieces (about 170 KiB each) instead of the batch
// (about 100 bytes a row, 6.5 MB at DefaultBatchRows): a goroutine of the
// writer's own writes one piece while the caller fills the other, since
// the writes (the kernel filling page-cache pages) cost more than laying
// the rows out.
//
// The header comes from Arrow's own IPC writer, handed a batch of the same
// shape whose buffers are all a shared block of zeros it never reads: the
// writer's payloads pass through a PayloadWriter of ours (payloadFile),
// which writes them as Arrow's stream writer would, except the body of a
// planned batch. Stacks must be added (AddStack) before the first event of
// the first batch that refers to them, since a batch's dictionary delta is
// written as it starts; an import adds them all first.
type StreamWriter struct {
	w         *Writer // schema, stack table, dictionaries; its IPC writer writes to pf
	pf        *payloadFile
	dest      *outfile.File
	finalPath string
	total     int64 // events announced
	nulls     []int // events without a stack in each batch

	batch      int   // the batch being written; -1 before the first
	rows, done int   // rows in it, and rows written
	body       int64 // file offset of its body
	off        [numCols][2]int64
	piece      *piece // rows [pieceLo, pieceLo+piece.n) of the batch: one of pieces
	pieces     [2]*piece
	jobs       chan *pieceJob // pieces to write, to writePieces
	back       chan pieceBack // pieces written (or not, after an error), from writePieces
	pieceLo    int
	pieceNulls int     // events without a stack written in the batch so far
	frameOf    []int32 // see frames
	closed     bool
}

// zeroBlock backs every buffer of the batches that shape hands to Arrow's
// writer, which lays out their header but never reads their values (the
// body of a planned batch is skipped). It is a variable, not an
// allocation: its pages are never touched, so they cost the process no
// memory, where a 512 KiB slice from the heap (which zeroes reused memory)
// was resident for the whole import.
var zeroBlock [8 * DefaultBatchRows]byte

// streamPiece is the rows a StreamWriter lays out before writing them: a
// power of 2 (piece.add indexes its arrays modulo it) and so a multiple
// of 8, so that pieces start on bitmap bytes. 2048 rows take 170 KiB;
// larger pieces cost memory for no gain in time.
const streamPiece = 2048

// CreateStream writes a trace of total events to path, as Create would (a
// file with no name put at path on Close), in batches of
// DefaultBatchRows; nulls[b] is the number of events with Stack NoStack in
// batch b (events [b·DefaultBatchRows, (b+1)·DefaultBatchRows)).
func CreateStream(path string, meta Meta, total int64, nulls []int) (*StreamWriter, error) {
	if want := (total + DefaultBatchRows - 1) / DefaultBatchRows; int64(len(nulls)) != want {
		return nil, fmt.Errorf("trace: create %s: %d null counts for %d batches", path, len(nulls), want)
	}
	dest, err := outfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trace: create %s: %w", path, err)
	}
	f := dest.File()
	s := &StreamWriter{dest: dest, finalPath: path, total: total, nulls: nulls, batch: -1,
		pf: &payloadFile{f: f}, jobs: make(chan *pieceJob, 1), back: make(chan pieceBack, 2)}
	s.pieces = [2]*piece{new(piece), new(piece)}
	s.piece = s.pieces[0]
	s.back <- pieceBack{p: s.pieces[1]}
	go writePieces(f, s.jobs, s.back)
	s.w = &Writer{}
	s.w.init(nil, meta, WriterOptions{})
	s.w.ipc = ipc.NewWriterWithPayloadWriter(s.pf, ipc.WithSchema(s.w.schema), ipc.WithAllocator(s.w.mem),
		ipc.WithDictionaryDeltas(true))
	return s, nil
}

// AddStack is Writer.AddStack.
func (s *StreamWriter) AddStack(st Stack) StackID { return s.w.AddStack(st) }

// Events reports how many events were written so far.
func (s *StreamWriter) Events() int64 { return s.w.nextSeq }

// WriteEvents appends evs, as Writer.WriteEvents does (stack ids mapped
// through stackMap when it is not nil). An error ends the writer.
func (s *StreamWriter) WriteEvents(evs []Event, stackMap []StackID) error {
	return s.WriteEventsThen(evs, stackMap, nil)
}

// WriteEventsThen is WriteEvents calling copied, if not nil, once evs are
// copied (or the writer failed), before it waits for the last piece's
// encoding: the caller may then reuse evs' memory while the writer waits.
func (s *StreamWriter) WriteEventsThen(evs []Event, stackMap []StackID, copied func()) error {
	w := s.w
	for w.err == nil && len(evs) > 0 {
		if s.done == s.rows {
			if w.err = s.startBatch(); w.err != nil {
				break
			}
		}
		k := min(len(evs), s.rows-s.done, streamPiece-s.piece.n)
		var j int
		if stackMap == nil {
			j = s.piece.add(evs[:k], w.nextSeq, s.frames())
		} else {
			j = s.piece.addMapped(evs[:k], stackMap, w.nextSeq, s.frames())
		}
		if j < k {
			w.err = rowError(&evs[j], stackMap, w.nextSeq+int64(j), w.stacks.len())
			break
		}
		w.nextSeq += int64(k)
		s.done += k
		evs = evs[k:]
		if len(evs) == 0 && copied != nil {
			copied()
			copied = nil
		}
		if s.piece.n == streamPiece || s.done == s.rows {
			w.err = s.flushPiece()
		}
	}
	if copied != nil {
		copied()
	}
	return w.err
}

// frames returns the frame column's value for each stack id plus one: 0
// for NoStack, then the innermost frame of each stack added
// (stackTable.first), which only grows, keeping its values.
func (s *StreamWriter) frames() []int32 {
	first := s.w.stacks.first
	if len(s.frameOf) != len(first)+1 {
		if s.frameOf == nil {
			s.frameOf = []int32{0}
		}
		s.frameOf = append(s.frameOf, first[len(s.frameOf)-1:]...)
	}
	return s.frameOf
}

// startBatch writes the next batch's dictionary deltas and header, and
// reserves its body.
func (s *StreamWriter) startBatch() error {
	s.batch++
	left := s.total - s.w.nextSeq
	if left <= 0 || s.batch >= len(s.nulls) {
		return fmt.Errorf("trace: write event %d: more events than the %d announced", s.w.nextSeq, s.total)
	}
	n := int(min(left, DefaultBatchRows))
	nulls := s.nulls[s.batch]
	if nulls < 0 || nulls > n {
		return fmt.Errorf("trace: batch %d: %d events without a stack in %d", s.batch, nulls, n)
	}
	// Where each buffer of the body lies, in Arrow's order: per column its
	// validity bitmap (written only with nulls) and its values, each padded
	// to 8 bytes.
	pad := func(b int64) int64 { return (b + 7) &^ 7 }
	bits := int64((n + 7) / 8)
	var at int64
	for c := range numCols {
		if (c == idxStack || c == idxFrame) && nulls > 0 {
			s.off[c][0] = at
			if nulls == n {
				// Arrow writes a new bitmap of zeros, padded to 64 bytes.
				at += (bits + 63) &^ 63
			} else {
				at += pad(bits)
			}
		}
		s.off[c][1] = at
		if w := colWidth[c]; w > 0 {
			at += pad(int64(n) * w)
		} else {
			at += pad(bits)
		}
	}
	rec := s.shape(n, nulls)
	s.pf.planned = true
	err := s.w.ipc.Write(rec)
	s.pf.planned = false
	rec.Release()
	if err == nil && s.pf.bodyLen != at {
		err = fmt.Errorf("body of %d bytes where the layout has %d", s.pf.bodyLen, at)
	}
	if err != nil {
		return fmt.Errorf("trace: write batch: %w", err)
	}
	s.body = s.pf.bodyAt
	s.rows, s.done, s.pieceLo, s.pieceNulls = n, 0, 0, 0
	s.piece.reset()
	return nil
}

// colWidth is the bytes per row of each column's values; 0 for a bitmap.
var colWidth = [numCols]int64{
	idxSeq: 8, idxTimeUs: 8, idxDevice: 4, idxAction: 1, idxAddr: 8, idxSize: 8, idxStream: 8,
	idxPoolA: 8, idxPoolB: 8, idxStack: 4, idxFrame: 4, idxBlock: 8, idxReconstructed: 0, idxPending: 0, idxDeviceUsed: 8,
}

// shape returns a batch of n rows, nulls of them without a stack, whose
// buffers are all zeros: what Arrow's writer needs to write the header
// (and the dictionaries) of the real one.
func (s *StreamWriter) shape(n, nulls int) arrow.Record {
	z := zeroBlock[:]
	bits := (n + 7) / 8
	c := &columns{
		seq: unsafe.Slice((*int64)(unsafe.Pointer(&z[0])), n), timeUs: unsafe.Slice((*int64)(unsafe.Pointer(&z[0])), n),
		size: unsafe.Slice((*int64)(unsafe.Pointer(&z[0])), n), block: unsafe.Slice((*int64)(unsafe.Pointer(&z[0])), n),
		used: unsafe.Slice((*int64)(unsafe.Pointer(&z[0])), n), device: unsafe.Slice((*int32)(unsafe.Pointer(&z[0])), n),
		action: unsafe.Slice((*int8)(unsafe.Pointer(&z[0])), n), addr: unsafe.Slice((*uint64)(unsafe.Pointer(&z[0])), n),
		stream: unsafe.Slice((*uint64)(unsafe.Pointer(&z[0])), n), poolA: unsafe.Slice((*uint64)(unsafe.Pointer(&z[0])), n),
		poolB: unsafe.Slice((*uint64)(unsafe.Pointer(&z[0])), n), stack: unsafe.Slice((*int32)(unsafe.Pointer(&z[0])), n),
		frame:      unsafe.Slice((*int32)(unsafe.Pointer(&z[0])), n),
		stackValid: z[:bits], stackNulls: nulls, recon: z[:bits], pending: z[:bits], n: n,
	}
	frames, stacks := s.w.stacks.dictionaries()
	arrays := c.arrays(s.w.actionDict, frames, stacks)
	rec := array.NewRecord(s.w.schema, arrays, int64(n))
	for _, a := range arrays {
		a.Release()
	}
	return rec
}

// pieceJob is a piece and where its buffers go in the file.
type pieceJob struct {
	p  *piece
	n  int
	to [numCols + 2]pieceWrite
}

type pieceWrite struct {
	b  []byte
	at int64
}

// pieceBack is a piece handed back by writePieces, and the first write
// error so far.
type pieceBack struct {
	p   *piece
	err error
}

// writePieces writes the jobs' buffers to f in turn, handing each piece
// back once written; after a failed write it only hands them back. It
// ends when jobs is closed, after handing back the last piece.
func writePieces(f *os.File, jobs <-chan *pieceJob, back chan<- pieceBack) {
	var err error
	for j := range jobs {
		for _, w := range j.to[:j.n] {
			if err == nil {
				_, err = f.WriteAt(w.b, w.at)
			}
		}
		back <- pieceBack{j.p, err}
	}
	close(back)
}

// flushPiece hands the piece's rows to writePieces, bound for their places
// in the batch's body, and takes the other piece once its rows are written.
func (s *StreamWriter) flushPiece() error {
	p := s.piece
	if p.n == 0 {
		return nil
	}
	r0 := int64(s.pieceLo)
	j := &pieceJob{p: p}
	put := func(c, buf int, b []byte, at int64) {
		if len(b) > 0 {
			j.to[j.n] = pieceWrite{b, s.body + s.off[c][buf] + at}
			j.n++
		}
	}
	n, nb := p.n, (p.n+7)/8
	put(idxSeq, 1, arrow.Int64Traits.CastToBytes(p.seq[:n]), r0*8)
	put(idxTimeUs, 1, arrow.Int64Traits.CastToBytes(p.timeUs[:n]), r0*8)
	put(idxDevice, 1, arrow.Int32Traits.CastToBytes(p.device[:n]), r0*4)
	put(idxAction, 1, arrow.Int8Traits.CastToBytes(p.action[:n]), r0)
	put(idxAddr, 1, arrow.Uint64Traits.CastToBytes(p.addr[:n]), r0*8)
	put(idxSize, 1, arrow.Int64Traits.CastToBytes(p.size[:n]), r0*8)
	put(idxStream, 1, arrow.Uint64Traits.CastToBytes(p.stream[:n]), r0*8)
	put(idxPoolA, 1, arrow.Uint64Traits.CastToBytes(p.poolA[:n]), r0*8)
	put(idxPoolB, 1, arrow.Uint64Traits.CastToBytes(p.poolB[:n]), r0*8)
	if s.nulls[s.batch] > 0 {
		put(idxStack, 0, p.valid[:nb], r0/8)
	}
	put(idxStack, 1, arrow.Int32Traits.CastToBytes(p.stack[:n]), r0*4)
	if s.nulls[s.batch] > 0 {
		put(idxFrame, 0, p.valid[:nb], r0/8)
	}
	put(idxFrame, 1, arrow.Int32Traits.CastToBytes(p.frame[:n]), r0*4)
	put(idxBlock, 1, arrow.Int64Traits.CastToBytes(p.block[:n]), r0*8)
	put(idxReconstructed, 1, p.recon[:nb], r0/8)
	put(idxPending, 1, p.pending[:nb], r0/8)
	put(idxDeviceUsed, 1, arrow.Int64Traits.CastToBytes(p.used[:n]), r0*8)
	s.pieceNulls += p.nulls
	s.pieceLo += p.n
	s.jobs <- j
	b := <-s.back
	if b.err != nil {
		return fmt.Errorf("trace: write %s: %w", s.finalPath, b.err)
	}
	s.piece = b.p
	s.piece.reset()
	if s.pieceLo == s.rows && s.pieceNulls != s.nulls[s.batch] {
		return fmt.Errorf("trace: batch %d: %d events without a stack, %d announced", s.batch, s.pieceNulls, s.nulls[s.batch])
	}
	return nil
}

// Close ends the stream and puts the file at its path (outfile). After a failed
// Close nothing is left at the destination.
func (s *StreamWriter) Close() error {
	if s.closed {
		return s.w.err
	}
	s.closed = true
	w := s.w
	err := w.err
	if err == nil && w.nextSeq != s.total {
		err = fmt.Errorf("trace: %d events written of the %d announced", w.nextSeq, s.total)
	}
	if werr := s.stopPieces(); err == nil && werr != nil {
		err = fmt.Errorf("trace: write %s: %w", s.finalPath, werr)
	}
	if err == nil && s.total == 0 {
		err = w.flush() // an empty trace still needs its schema: one empty batch
	}
	if cerr := w.ipc.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("trace: end stream: %w", cerr)
	}
	w.release()
	if ferr := s.pf.flush(); err == nil && ferr != nil {
		err = fmt.Errorf("trace: write %s: %w", s.finalPath, ferr)
	}
	if err == nil {
		if cerr := s.dest.Commit(); cerr != nil {
			err = fmt.Errorf("trace: write %s: %w", s.finalPath, cerr)
		}
	} else {
		s.dest.Abort()
	}
	w.err = err
	if err == nil {
		w.err = errors.New("trace: writer is closed")
	}
	return err
}

// Abort discards the output. Safe after Close (then it does nothing).
func (s *StreamWriter) Abort() {
	if s.closed {
		return
	}
	s.closed = true
	s.w.err = errors.New("trace: writer aborted")
	s.stopPieces()
	s.w.ipc.Close()
	s.w.release()
	s.dest.Abort()
}

// stopPieces waits for the pieces handed to writePieces to be written,
// ends it, and returns its first write error.
func (s *StreamWriter) stopPieces() error {
	if s.jobs == nil {
		return nil
	}
	close(s.jobs)
	s.jobs = nil
	var err error
	for b := range s.back {
		if err == nil {
			err = b.err
		}
	}
	return err
}

// payloadFile is the IPC writer's PayloadWriter for a StreamWriter: it
// writes each message as Arrow's stream writer does (continuation marker,
// length, flatbuffer padded to 8 bytes, body buffers each padded to 8),
// at the file's end, through a small buffer, except the body of a planned
// record batch, whose space it skips, leaving its offset in bodyAt.
type payloadFile struct {
	f       *os.File
	pos     int64 // file offset of buf[0]
	buf     []byte
	err     error
	planned bool
	bodyAt  int64
	bodyLen int64
}

func (p *payloadFile) Start() error { return nil }

func (p *payloadFile) Close() error {
	p.Write([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}) // end of stream
	return p.flush()
}

func (p *payloadFile) WritePayload(pl ipc.Payload) error {
	meta := pl.Meta()
	defer meta.Release()
	msg := ipc.NewMessage(meta, memory.NewBufferBytes(nil))
	typ, bodyLen := msg.Type(), msg.BodyLen()
	msg.Release()
	// writeMessage in arrow/ipc.
	n := int32(meta.Len()) + 8
	if r := n % 8; r != 0 {
		n += 8 - r
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[:4], 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(n-8))
	p.Write(hdr[:])
	p.Write(meta.Bytes())
	p.Write(make([]byte, int(n)-meta.Len()-8))
	if p.planned && typ == ipc.MessageRecordBatch {
		if err := p.flush(); err != nil {
			return err
		}
		p.bodyAt, p.bodyLen = p.pos, bodyLen
		p.pos += bodyLen
		return nil
	}
	if err := pl.SerializeBody(p); err != nil {
		return err
	}
	return p.err
}

// Write appends b at the end of what was written.
func (p *payloadFile) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	p.buf = append(p.buf, b...)
	if len(p.buf) >= 64<<10 {
		p.flush()
	}
	return len(b), p.err
}

func (p *payloadFile) flush() error {
	if p.err == nil && len(p.buf) > 0 {
		_, p.err = p.f.WriteAt(p.buf, p.pos)
		p.pos += int64(len(p.buf))
		p.buf = p.buf[:0]
	}
	return p.err
}
