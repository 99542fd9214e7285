package trace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// DefaultBatchRows is the number of events per Arrow record batch. A killed
// writer loses at most the batch in progress; a reader holds one batch.
const DefaultBatchRows = 64 << 10

// WriterOptions tune a Writer. The zero value is fine.
type WriterOptions struct {
	BatchRows int // events per record batch; DefaultBatchRows when 0
	// InPlace writes straight to the destination instead of a temporary file
	// renamed on Close, and hands each batch to the file as it ends. Live
	// recordings use it so that a killed process leaves a trace readable up
	// to its last flushed batch; imports do not, so that a failed import
	// leaves nothing behind.
	InPlace bool
	Mem     memory.Allocator // arrow allocator; memory.DefaultAllocator when nil
	// Events, when known, is how many events will be written: the batch
	// buffers that WriteEvents fills are then sized once, to the batch or
	// to what is left of the trace, instead of grown as events come. A
	// wrong value costs only time.
	Events int64
}

// Writer streams events into an Arrow IPC stream in bounded record batches.
// Memory is bounded by one batch plus the stack table.
type Writer struct {
	out       io.Writer
	file      *os.File
	async     *asyncFile // file's writer
	inPlace   bool       // async hands each batch to the file as it ends
	tmpPath   string     // "" when writing in place or to a plain io.Writer
	finalPath string

	mem    memory.Allocator
	schema *arrow.Schema
	ipc    *ipc.Writer

	// The batch being filled, one Go slice per column: Write appends to
	// them and flush hands them to Arrow without copying (cols.go).
	cols            columns
	actionDict      arrow.Array
	rows, batchRows int
	hint            int64 // WriterOptions.Events
	nextSeq         int64
	stacks          stackTable
	bulk            bulkScratch // WriteColumns' own columns
	layout          []*columns  // WriteEvents' batches being laid out
	err             error
	closed          bool
}

// Create writes a trace to path. Unless opts.InPlace, the events go to a
// temporary file in the same directory that Close renames to path, so a
// failed, killed or interrupted write leaves nothing at path.
//
// That temporary file is not fsynced before the rename, as go build, cp and
// tar do not sync theirs: such a trace is made from something that still
// exists (a snapshot, another trace) and can be made again, and the sync
// would be 10-25% of an import's time. What it gives up is the power-loss
// case: a machine that goes down right after the rename may leave a short
// or empty file at path, which the reader then refuses as cut short or not
// a trace, never misreads. A live recording (InPlace) cannot be made again,
// so it syncs as it goes and at Close (asyncfile.go). A file already at
// path is unlinked just before the rename, not renamed over (replaceFile),
// so a reader opening path in that moment finds nothing there.
func Create(path string, meta Meta, opts WriterOptions) (*Writer, error) {
	var f *os.File
	var err error
	w := &Writer{finalPath: path}
	if opts.InPlace {
		f, err = os.Create(path)
	} else {
		f, err = os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
		if f != nil {
			w.tmpPath = f.Name()
			// CreateTemp makes the file private; a trace is an ordinary output.
			err = f.Chmod(0o644)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("trace: create %s: %w", path, err)
	}
	w.file = f
	if opts.InPlace {
		// A killed recording must leave its batches in the file: each goes
		// to the writing goroutine as it ends (writeBatch).
		w.inPlace = true
		w.async = newAsyncFile(f, liveBlocks, liveSyncEvery)
	} else {
		w.async = newAsyncFile(f, asyncBlocks, 0)
	}
	w.init(w.async, meta, opts)
	return w, nil
}

// NewWriter writes a trace to out. Close flushes it but does not close out.
func NewWriter(out io.Writer, meta Meta, opts WriterOptions) *Writer {
	w := &Writer{}
	w.init(out, meta, opts)
	return w
}

func (w *Writer) init(out io.Writer, meta Meta, opts WriterOptions) {
	w.out = out
	w.mem = opts.Mem
	if w.mem == nil {
		w.mem = memory.DefaultAllocator
	}
	w.batchRows = opts.BatchRows
	w.hint = opts.Events
	if w.batchRows <= 0 {
		w.batchRows = DefaultBatchRows
	}
	w.schema = newSchema(&meta)
	w.ipc = ipc.NewWriter(out, ipc.WithSchema(w.schema), ipc.WithAllocator(w.mem), ipc.WithDictionaryDeltas(true))
	ab := array.NewStringBuilder(w.mem)
	for k := KindAlloc; k < numKinds; k++ {
		ab.Append(k.String())
	}
	w.actionDict = ab.NewArray()
	ab.Release()
	w.stacks.init(w.mem)
}

// AddStack interns s and returns its id for Event.Stack. Identical stacks
// share one id and are stored once, and so are identical frames.
func (w *Writer) AddStack(s Stack) StackID { return w.stacks.add(s) }

// Write appends ev. Its Seq is assigned by the writer (0, 1, 2, ...), and
// ev.Stack must be NoStack or an id returned by AddStack.
func (w *Writer) Write(ev *Event) error {
	if w.err != nil {
		return w.err
	}
	if err := checkEvent(ev.Kind, ev.Stack, w.nextSeq, w.stacks.len()); err != nil {
		return err
	}
	w.cols.add(ev, w.nextSeq, w.stacks.first)
	w.nextSeq++
	w.rows++
	if w.rows >= w.batchRows {
		return w.Flush()
	}
	return nil
}

// checkEvent returns the error for an event of kind with stack id stack,
// the seq-th of the trace, when the writer has nstacks stacks; nil when the
// event can be written.
func checkEvent(kind Kind, stack StackID, seq int64, nstacks int) error {
	if !kind.Valid() {
		return fmt.Errorf("trace: write event %d: invalid kind %v", seq, kind)
	}
	if stack != NoStack && (stack < 0 || int(stack) >= nstacks) {
		return fmt.Errorf("trace: write event %d: stack id %d was not added", seq, stack)
	}
	return nil
}

// WriteEvents appends evs as Write would one by one, with the same bytes
// written, their stack ids first mapped through stackMap when it is not nil
// (NoStack stays NoStack). It is the bulk path for events already in memory
// (import): rows are laid out without a call per event, and the whole
// batches among evs are laid out on up to maxLayout goroutines, while this
// one hands them, in order, to the IPC writer. An invalid event (as Write
// checks them) ends the writer with Write's error for it: unlike Write,
// which leaves the writer usable, the events around it may or may not have
// been written.
func (w *Writer) WriteEvents(evs []Event, stackMap []StackID) error {
	if w.err != nil {
		return w.err
	}
	// The open batch first: up to its end, or all of evs if they end before.
	if w.rows > 0 || len(evs) < w.batchRows {
		k := min(len(evs), w.batchRows-w.rows)
		if err := w.addRows(&w.cols, evs[:k], stackMap); err != nil {
			return err
		}
		evs = evs[k:]
		w.rows += k
		if w.rows >= w.batchRows {
			if w.err = w.flush(); w.err != nil {
				return w.err
			}
		}
	}
	if full := len(evs) / w.batchRows * w.batchRows; full > 0 {
		if err := w.writeBatches(evs[:full], stackMap); err != nil {
			return err
		}
		evs = evs[full:]
	}
	if len(evs) > 0 { // fewer than a batch: buffered, as Write leaves them
		if err := w.addRows(&w.cols, evs, stackMap); err != nil {
			return err
		}
		w.rows += len(evs)
	}
	return nil
}

// addRows lays evs out at the end of c, the next events of the trace.
func (w *Writer) addRows(c *columns, evs []Event, stackMap []StackID) error {
	if need := c.n + len(evs); cap(c.seq) < need && w.hint > 0 {
		// Size the batch once, to what the trace is expected to put in it.
		left := w.hint - w.nextSeq + int64(c.n)
		c.reserve(max(need, int(min(int64(w.batchRows), left))))
	}
	if _, err := c.addEvents(evs, stackMap, w.nextSeq, w.stacks.first); err != nil {
		w.err = err
		return err
	}
	w.nextSeq += int64(len(evs))
	return nil
}

// maxLayout bounds the batches WriteEvents lays out at once: each holds
// about 100 bytes per row (6.5 MB at DefaultBatchRows), and four keep the
// IPC writer, which copies them out one at a time, busy.
const maxLayout = 4

// writeBatches writes evs, a whole number of batches and nothing buffered
// before them, laying the batches out on goroutines (at most maxLayout
// ahead of the one being written) and writing them in order.
func (w *Writer) writeBatches(evs []Event, stackMap []StackID) error {
	n := len(evs) / w.batchRows
	type job struct {
		c    *columns
		err  error
		done chan struct{}
	}
	jobs := make([]job, n)
	if len(w.layout) == 0 {
		// Nothing is buffered, so the open batch's columns are free until
		// this returns: lay the first batch out in them rather than in
		// columns of its own (a trace of one or two batches then needs
		// one set).
		w.layout = append(w.layout, &w.cols)
	}
	for len(w.layout) < min(n, maxLayout) {
		w.layout = append(w.layout, &columns{})
	}
	first := w.stacks.first
	start := func(b int) {
		j := &jobs[b]
		j.c, j.done = w.layout[b%len(w.layout)], make(chan struct{})
		go func() {
			defer close(j.done)
			j.c.reset()
			lo := b * w.batchRows
			_, j.err = j.c.addEvents(evs[lo:lo+w.batchRows], stackMap, w.nextSeq+int64(lo), first)
		}()
	}
	for b := range min(n, len(w.layout)) {
		start(b)
	}
	var err error
	for b := range jobs {
		j := &jobs[b]
		if j.done == nil {
			break // not started, after an error
		}
		<-j.done
		if err == nil {
			err = j.err
		}
		if err == nil {
			err = w.writeBatch(j.c)
		}
		// Its columns are free once written (or not to be written).
		if next := b + len(w.layout); next < n && err == nil {
			start(next)
		}
	}
	w.cols.reset() // it may hold a batch laid out above, now written
	if err != nil {
		w.err = err
		return err
	}
	w.nextSeq += int64(len(evs))
	return nil
}

// Columns is a block of events laid out column by column, for WriteColumns:
// row i is the event (TimeUs[i], Kind[i], Addr[i], ...) on device Device.
// Each slice holds at least N values; Seq is assigned by the writer and the
// rows carry no Flags.
type Columns struct {
	N          int
	Device     int32 // of every row
	TimeUs     []int64
	Kind       []Kind
	Addr       []uint64
	Size       []int64
	Stream     []uint64
	PoolA      []uint64
	PoolB      []uint64
	Stack      []StackID // NoStack or ids from AddStack
	BlockSize  []int64
	DeviceUsed []int64
}

// WriteColumns writes c's N events, after any that Write buffered, as one
// record batch of their own, handing c's slices to Arrow without copying
// them (they are written, or copied into a Create'd Writer's blocks, before
// it returns and may then be reused; the write calls and syncs of a Create'd
// Writer are made by a goroutine of its own). Beyond the bytes written it
// costs a few ns per event, with no call per event: live recording lays its
// events out as Columns on a goroutine of its own and writes them from
// there.
func (w *Writer) WriteColumns(c *Columns) error {
	if w.err != nil || c.N == 0 {
		return w.err
	}
	if w.rows > 0 {
		if w.err = w.flush(); w.err != nil {
			return w.err
		}
	}
	cols, err := w.bulk.columns(c, w.nextSeq, w.stacks.first)
	if err != nil {
		return err
	}
	w.err = w.writeBatch(cols)
	if w.err == nil {
		w.nextSeq += int64(c.N)
	}
	return w.err
}

// Events reports how many events were written so far.
func (w *Writer) Events() int64 { return w.nextSeq }

// Flush writes the events buffered so far as one record batch. Live recorders
// call it periodically so that a crash loses little.
func (w *Writer) Flush() error {
	if w.err != nil || w.rows == 0 {
		return w.err
	}
	w.err = w.flush()
	return w.err
}

func (w *Writer) flush() error {
	err := w.writeBatch(&w.cols)
	// The arrays borrow the column slices: reuse them only once written.
	w.rows = 0
	w.cols.reset()
	return err
}

// writeBatch writes c as one record batch.
func (w *Writer) writeBatch(c *columns) error {
	frames, stacks := w.stacks.dictionaries()
	arrays := c.arrays(w.actionDict, frames, stacks)
	defer func() {
		for _, a := range arrays {
			a.Release()
		}
	}()
	rec := array.NewRecord(w.schema, arrays, int64(c.n))
	defer rec.Release()
	if err := w.ipc.Write(rec); err != nil {
		return fmt.Errorf("trace: write batch: %w", err)
	}
	if w.inPlace {
		// The batch goes to the file now, not once a block is full.
		w.async.push()
	}
	return nil
}

// Close flushes the last batch, ends the stream and, for Create, renames the
// temporary file into place. After a failed Close nothing is left at the
// destination (unless InPlace).
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	err := w.Flush()
	if err == nil && w.nextSeq == 0 {
		// An empty trace still needs its schema (and metadata) on disk: write
		// one empty batch.
		err = w.flush()
	}
	if cerr := w.ipc.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("trace: end stream: %w", cerr)
	}
	w.release()
	if w.async != nil {
		if ferr := w.async.finish(); err == nil && ferr != nil {
			err = fmt.Errorf("trace: write %s: %w", w.finalPath, ferr)
		}
	}
	if w.file != nil {
		if w.inPlace { // a temporary file is not synced: see Create
			if serr := w.file.Sync(); err == nil && serr != nil {
				err = fmt.Errorf("trace: sync %s: %w", w.finalPath, serr)
			}
		}
		if cerr := w.file.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("trace: close %s: %w", w.finalPath, cerr)
		}
		if w.tmpPath != "" {
			if err == nil {
				if rerr := replaceFile(w.tmpPath, w.finalPath); rerr != nil {
					err = fmt.Errorf("trace: %w", rerr)
				}
			}
			if err != nil {
				os.Remove(w.tmpPath)
			}
		}
	}
	w.err = err
	if err == nil {
		w.err = errors.New("trace: writer is closed")
	}
	return err
}

// replaceFile renames tmp to path. A regular file already at path is
// unlinked first: renamed over, it would make ext4 (auto_da_alloc) start
// writing tmp's data out within the rename, a safeguard for writers that
// skip fsync which costs about as long as writing the file (10 ms for a
// 9 MB trace, a quarter of a small import). Create does not sync the
// temporary file by design (see there), so it gives up nothing the comment
// there does not already: between the unlink and the rename nothing is at
// path, as after a failed write.
func replaceFile(tmp, path string) error {
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() {
		os.Remove(path) // if this fails, the rename replaces it as before
	}
	return os.Rename(tmp, path)
}

// Abort discards the output: the temporary file is removed and nothing
// appears at the destination. Safe to call after Close (then it does nothing).
func (w *Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.err = errors.New("trace: writer aborted")
	w.ipc.Close()
	w.release()
	if w.async != nil {
		w.async.finish()
	}
	if w.file != nil {
		w.file.Close()
		if w.tmpPath != "" {
			os.Remove(w.tmpPath)
		}
	}
}

func (w *Writer) release() {
	w.actionDict.Release()
	w.stacks.release()
}
