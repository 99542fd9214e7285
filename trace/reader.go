package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/ipc"
)

// ErrTruncated is reported by Reader.Truncated's callers when a stream ended
// without its end-of-stream marker: a recording killed mid-run, or a copy cut
// short. The events before the cut are all readable.
var ErrTruncated = errors.New("trace: stream ends without its end-of-stream marker")

// Reader streams the events of a trace, one record batch in memory at a time.
//
//	rd, err := trace.Open(path)
//	...
//	for rd.Next() {
//		ev := rd.Event()
//	}
//	if err := rd.Err(); err != nil { ... }
type Reader struct {
	name   string
	file   *os.File
	src    *tailReader
	ipc    *ipc.Reader
	meta   Meta
	ev     Event
	err    error
	done   bool
	cut    bool
	stacks []Stack
	frames []Frame // v2's frame table, as read so far

	// Current batch: typed value slices resolved once per batch.
	rec       arrow.Record
	row, rows int
	seq       []int64
	timeUs    []int64
	device    []int32
	actions   []Kind // per row
	addr      []uint64
	size      []int64
	stream    []uint64
	poolA     []uint64
	poolB     []uint64
	stackIDs  []StackID // per row; nil when the column is absent
	block     []int64
	used      []int64
	flags     []Flags // per row
	kindBuf   []Kind
	stackBuf  []StackID
	// Defaults for absent optional columns (see defaults).
	zeros     []int64
	zerosU    []uint64
	zeros32   []int32
	noStack   []StackID
	seqBuf    []int64
	nextSeq   int64
	kindOfIdx []Kind // action dictionary index → Kind, per batch
	unknown   int64  // events with an action this version does not know
	ahead     *ahead // the workers that decode the batches (DecodeAhead), or nil
	// dictsOnly: a DecodeAhead worker's Reader of the dictionaries, whose
	// batches have no rows: bind takes their dictionaries all the same.
	dictsOnly bool
}

// Open opens the trace at path. Errors name the file.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trace: %w", err)
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("trace: %s: is a directory, not a trace", path)
	}
	r, err := newReader(path, f, st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	r.file = f
	return r, nil
}

// cutSchema is the error for an input that ended before its schema did: a
// trace cut short, or a short file that never was one.
func cutSchema(name string, src *tailReader) error {
	if !src.arrowStart() {
		return fmt.Errorf("trace: %s: not an Arrow IPC stream (a trace starts with 0xFFFFFFFF)", name)
	}
	return fmt.Errorf("trace: %s: truncated before the end of its schema", name)
}

// NewReader reads a trace from r. name is used in error messages.
func NewReader(r io.Reader, name string) (*Reader, error) {
	size := int64(-1)
	if br, ok := r.(*bytes.Reader); ok {
		size = br.Size()
	}
	return newReader(name, r, size)
}

func newReader(name string, r io.Reader, size int64) (rd *Reader, err error) {
	src := &tailReader{r: r, size: size}
	rd = &Reader{name: name, src: src}
	defer func() {
		// arrow-go can panic on malformed flatbuffers; input never panics us.
		if p := recover(); p != nil {
			if p == errTooLarge {
				rd, err = nil, cutSchema(name, src)
				return
			}
			rd, err = nil, fmt.Errorf("trace: %s: corrupt trace (%v)", name, p)
		}
	}()
	rdr, err := ipc.NewReader(src, ipc.WithAllocator(&boundedAllocator{src: src}), ipc.WithDelayReadSchema(false))
	if err != nil {
		if size == 0 {
			return nil, fmt.Errorf("trace: %s: empty file (a recording cut short before its first batch?)", name)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, cutSchema(name, src)
		}
		return nil, fmt.Errorf("trace: %s: not an Arrow IPC stream (%v)", name, err)
	}
	rd.ipc = rdr
	md := rdr.Schema().Metadata()
	meta, err := parseMeta(md.Keys(), md.Values())
	if err != nil {
		rdr.Release()
		return nil, fmt.Errorf("trace: %s: %v", name, err)
	}
	if meta.Version > Current {
		rdr.Release()
		return nil, &VersionError{Path: name, Got: meta.Version}
	}
	rd.meta = meta
	if err := rd.checkSchema(rdr.Schema()); err != nil {
		rdr.Release()
		return nil, err
	}
	return rd, nil
}

func (r *Reader) checkSchema(s *arrow.Schema) error {
	for _, c := range []struct {
		name string
		id   arrow.Type
	}{{ColAction, arrow.DICTIONARY}, {ColAddr, arrow.UINT64}, {ColSizeBytes, arrow.INT64}} {
		idx := s.FieldIndices(c.name)
		if len(idx) != 1 {
			return fmt.Errorf("trace: %s: required column %q is missing", r.name, c.name)
		}
		if s.Field(idx[0]).Type.ID() != c.id {
			return fmt.Errorf("trace: %s: column %q has type %s", r.name, c.name, s.Field(idx[0]).Type)
		}
	}
	return nil
}

// Meta returns the trace's metadata.
func (r *Reader) Meta() Meta { return r.meta }

// Next advances to the next event. It returns false at the end of the trace
// or on error; check Err.
func (r *Reader) Next() bool { return r.NextTo(&r.ev) }

// NextTo is Next that decodes the event into e, every field of it (Ref
// 0), rather than into the one Event returns, which it leaves as it was: a
// caller that keeps the events in a slice of its own decodes them there,
// without copying each.
func (r *Reader) NextTo(e *Event) bool {
	if r.ahead != nil {
		return !r.done && r.nextAhead(e)
	}
	if r.row < r.rows {
		r.fill(e)
		return true
	}
	for {
		if r.done || !r.nextBatch() {
			return false
		}
		if r.rows > 0 {
			r.fill(e)
			return true
		}
	}
}

// fill copies row r.row into e. bind points absent optional columns at
// shared default slices, so this is straight-line code.
func (r *Reader) fill(e *Event) {
	i := r.row
	r.row++
	e.Seq = r.seq[i]
	e.TimeUs = r.timeUs[i]
	e.Device = r.device[i]
	e.Kind = r.actions[i]
	e.Addr = r.addr[i]
	e.Size = r.size[i]
	e.Stream = r.stream[i]
	e.Pool = PoolID{r.poolA[i], r.poolB[i]}
	e.Stack = r.stackIDs[i]
	e.Flags = r.flags[i]
	e.BlockSize = r.block[i]
	e.DeviceUsed = r.used[i]
	e.Ref = 0
}

// defaults gives absent optional columns their documented values.
func (r *Reader) defaults(n int) {
	if len(r.zeros) < n {
		r.zeros = make([]int64, n)
		r.zerosU = make([]uint64, n)
		r.zeros32 = make([]int32, n)
		r.noStack = make([]StackID, n)
		for i := range r.noStack {
			r.noStack[i] = NoStack
		}
	}
	if r.seq == nil {
		// Without a seq column, events are numbered in file order.
		if cap(r.seqBuf) < n {
			r.seqBuf = make([]int64, n)
		}
		r.seq = r.seqBuf[:n]
		for i := range r.seq {
			r.seq[i] = r.nextSeq + int64(i)
		}
	}
	r.nextSeq = r.seq[n-1] + 1
	for _, c := range []*[]int64{&r.timeUs, &r.block, &r.used} {
		if *c == nil {
			*c = r.zeros[:n]
		}
	}
	for _, c := range []*[]uint64{&r.stream, &r.poolA, &r.poolB} {
		if *c == nil {
			*c = r.zerosU[:n]
		}
	}
	if r.device == nil {
		r.device = r.zeros32[:n]
	}
	if r.stackIDs == nil {
		r.stackIDs = r.noStack[:n]
	}
}

func (r *Reader) nextBatch() (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			ok = false
			r.row, r.rows, r.done = 0, 0, true
			if p == errTooLarge {
				// A message longer than the rest of the file: cut short.
				r.cut = true
				return
			}
			r.fail(fmt.Errorf("trace: %s: corrupt record batch (%v)", r.name, p))
		}
	}()
	r.row, r.rows = 0, 0
	if !r.ipc.Next() {
		r.done = true
		if err := r.ipc.Err(); err != nil {
			// arrow wraps a failed body allocation with %v, not %w: match the
			// text too, or a trace cut inside a large batch reads as corrupt.
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errTooLarge) ||
				strings.Contains(err.Error(), errTooLarge.Error()) {
				// A partial message at the end: a recording killed mid-batch.
				r.cut = true
				return false
			}
			r.fail(fmt.Errorf("trace: %s: %w", r.name, err))
			return false
		}
		r.cut = !r.src.sawEOS()
		return false
	}
	rec := r.ipc.Record()
	if err := r.bind(rec); err != nil {
		r.fail(err)
		return false
	}
	r.rows = int(rec.NumRows())
	return true
}

// bind resolves the typed columns of one batch and extends the stack table
// with new dictionary entries.
func (r *Reader) bind(rec arrow.Record) error {
	s := rec.Schema()
	col := func(name string) arrow.Array {
		if idx := s.FieldIndices(name); len(idx) == 1 {
			return rec.Column(idx[0])
		}
		return nil
	}
	n := int(rec.NumRows())
	if n == 0 {
		if r.dictsOnly {
			if err := r.bindActions(col(ColAction), 0); err != nil {
				return err
			}
			return r.bindStacks(col(ColStack), col(ColFrame), 0)
		}
		return nil
	}
	i64 := func(name string) ([]int64, error) {
		c := col(name)
		if c == nil {
			return nil, nil
		}
		a, ok := c.(*array.Int64)
		if !ok {
			return nil, fmt.Errorf("trace: %s: column %q must be int64, is %s", r.name, name, c.DataType())
		}
		if err := r.checkValues(name, a.NullN(), len(a.Int64Values()), n); err != nil {
			return nil, err
		}
		return a.Int64Values(), nil
	}
	u64 := func(name string) ([]uint64, error) {
		c := col(name)
		if c == nil {
			return nil, nil
		}
		a, ok := c.(*array.Uint64)
		if !ok {
			return nil, fmt.Errorf("trace: %s: column %q must be uint64, is %s", r.name, name, c.DataType())
		}
		if err := r.checkValues(name, a.NullN(), len(a.Uint64Values()), n); err != nil {
			return nil, err
		}
		return a.Uint64Values(), nil
	}
	var err error
	for _, c := range [...]struct {
		dst  *[]int64
		name string
	}{{&r.seq, ColSeq}, {&r.timeUs, ColTimeUs}, {&r.size, ColSizeBytes}, {&r.block, ColBlockBytes}, {&r.used, ColDeviceUsed}} {
		if *c.dst, err = i64(c.name); err != nil {
			return err
		}
	}
	for _, c := range [...]struct {
		dst  *[]uint64
		name string
	}{{&r.addr, ColAddr}, {&r.stream, ColStream}, {&r.poolA, ColPoolA}, {&r.poolB, ColPoolB}} {
		if *c.dst, err = u64(c.name); err != nil {
			return err
		}
	}
	if r.poolA == nil || r.poolB == nil {
		r.poolA, r.poolB = nil, nil
	}
	r.device = nil
	if c := col(ColDevice); c != nil {
		a, ok := c.(*array.Int32)
		if !ok {
			return fmt.Errorf("trace: %s: column %q must be int32, is %s", r.name, ColDevice, c.DataType())
		}
		if err := r.checkValues(ColDevice, a.NullN(), len(a.Int32Values()), n); err != nil {
			return err
		}
		r.device = a.Int32Values()
	}
	if r.size == nil || r.addr == nil {
		return fmt.Errorf("trace: %s: a batch lacks column %q or %q", r.name, ColSizeBytes, ColAddr)
	}
	if cap(r.flags) < n {
		r.flags = make([]Flags, n)
	}
	r.flags = r.flags[:n]
	clear(r.flags)
	for _, f := range []struct {
		col  string
		flag Flags
	}{{ColReconstructed, FlagReconstructed}, {ColPendingFree, FlagPending}} {
		c, ok := col(f.col).(*array.Boolean)
		if !ok {
			continue
		}
		if c.Len() != n {
			return fmt.Errorf("trace: %s: column %q has %d rows in a batch of %d", r.name, f.col, c.Len(), n)
		}
		// Most batches have no flag set: skip them with one popcount.
		if bits := c.Data().Buffers()[1]; bits == nil || bitutil.CountSetBits(bits.Bytes(), c.Data().Offset(), n) == 0 {
			continue
		}
		bits, off := c.Data().Buffers()[1].Bytes(), c.Data().Offset()
		if len(bits)*8 < off+n {
			return fmt.Errorf("trace: %s: column %q is shorter than its batch", r.name, f.col)
		}
		for i := 0; i < n; i++ {
			if j := off + i; bits[j>>3]&(1<<(j&7)) != 0 {
				r.flags[i] |= f.flag
			}
		}
	}
	if err := r.bindActions(col(ColAction), n); err != nil {
		return err
	}
	if err := r.bindStacks(col(ColStack), col(ColFrame), n); err != nil {
		return err
	}
	r.defaults(n)
	return nil
}

// checkValues returns the error for a column of the right type with nulls
// (which no column but stack may have) or fewer than n values.
func (r *Reader) checkValues(name string, nulls, values, n int) error {
	if nulls > 0 {
		return fmt.Errorf("trace: %s: column %q has %d null values in a batch of %d rows; it must have none", r.name, name, nulls, n)
	}
	if values < n {
		return fmt.Errorf("trace: %s: column %q has %d values in a batch of %d rows", r.name, name, values, n)
	}
	return nil
}

func (r *Reader) bindActions(c arrow.Array, n int) error {
	d, ok := c.(*array.Dictionary)
	if !ok {
		return fmt.Errorf("trace: %s: column %q must be dictionary-encoded strings", r.name, ColAction)
	}
	dict, ok := d.Dictionary().(*array.String)
	if !ok {
		return fmt.Errorf("trace: %s: column %q must be dictionary-encoded strings", r.name, ColAction)
	}
	r.kindOfIdx = r.kindOfIdx[:0]
	for j := 0; j < dict.Len(); j++ {
		k, _ := ParseKind(dict.Value(j))
		r.kindOfIdx = append(r.kindOfIdx, k)
	}
	if d.Len() != n {
		return fmt.Errorf("trace: %s: column %q has %d rows in a batch of %d", r.name, ColAction, d.Len(), n)
	}
	if cap(r.kindBuf) < n {
		r.kindBuf = make([]Kind, n)
	}
	r.actions = r.kindBuf[:n]
	if d.NullN() > 0 {
		return fmt.Errorf("trace: %s: %d rows have no action", r.name, d.NullN())
	}
	idx, ok := d.Indices().(*array.Int8)
	if !ok || len(idx.Int8Values()) < n {
		// Another writer's index width: the general path.
		for i := 0; i < n; i++ {
			if err := r.setAction(i, d.GetValueIndex(i)); err != nil {
				return err
			}
		}
		return nil
	}
	for i, j := range idx.Int8Values()[:n] {
		if j < 0 || int(j) >= len(r.kindOfIdx) {
			return fmt.Errorf("trace: %s: row %d: action index %d out of range", r.name, i, j)
		}
		k := r.kindOfIdx[j]
		if k == KindInvalid {
			r.unknown++
		}
		r.actions[i] = k
	}
	return nil
}

func (r *Reader) setAction(i, j int) error {
	if j < 0 || j >= len(r.kindOfIdx) {
		return fmt.Errorf("trace: %s: row %d: action index %d out of range", r.name, i, j)
	}
	k := r.kindOfIdx[j]
	if k == KindInvalid {
		r.unknown++
	}
	r.actions[i] = k
	return nil
}

func (r *Reader) bindStacks(c, fc arrow.Array, n int) error {
	r.stackIDs = nil
	if c == nil {
		return nil
	}
	d, ok := c.(*array.Dictionary)
	if !ok {
		return fmt.Errorf("trace: %s: column %q must be dictionary-encoded", r.name, ColStack)
	}
	idx, ok := d.Indices().(*array.Int32)
	if !ok {
		return fmt.Errorf("trace: %s: column %q must have int32 indices", r.name, ColStack)
	}
	// Dictionaries only grow (delta batches); a replacement dictionary would
	// renumber stacks, so rebuild the table in that case. A fresh table:
	// slices Stacks handed out stay valid.
	switch dict := d.Dictionary().(type) {
	case *array.List: // v2: lists of ids into the frame table
		if err := r.bindFrames(fc); err != nil {
			return err
		}
		ids, ok := dict.ListValues().(*array.Int32)
		if !ok || ids.NullN() > 0 || dict.NullN() > 0 {
			return fmt.Errorf("trace: %s: column %q must be a dictionary of non-null lists of non-null int32 frame ids", r.name, ColStack)
		}
		if dict.Len() < len(r.stacks) {
			r.stacks = nil
		}
		offs, vals := dict.Offsets(), ids.Int32Values()
		for j := len(r.stacks); j < dict.Len(); j++ {
			lo, hi := offs[j], offs[j+1]
			if lo < 0 || lo > hi || int(hi) > len(vals) {
				return fmt.Errorf("trace: %s: column %q: stack %d has bad offsets", r.name, ColStack, j)
			}
			st := make(Stack, hi-lo)
			for k, f := range vals[lo:hi] {
				if f < 0 || int(f) >= len(r.frames) {
					return fmt.Errorf("trace: %s: column %q: stack %d refers to frame %d of %d", r.name, ColStack, j, f, len(r.frames))
				}
				st[k] = r.frames[f]
			}
			r.stacks = append(r.stacks, st)
		}
	case *array.String: // v1: each stack's text (FormatStack)
		if dict.Len() < len(r.stacks) || (len(r.stacks) > 0 && FormatStack(r.stacks[0]) != dict.Value(0)) {
			r.stacks = nil
		}
		for j := len(r.stacks); j < dict.Len(); j++ {
			r.stacks = append(r.stacks, ParseStack(dict.Value(j)))
		}
	default:
		return fmt.Errorf("trace: %s: column %q must be dictionary-encoded lists of frame ids (or, in v1, strings)", r.name, ColStack)
	}
	if idx.Len() != n {
		return fmt.Errorf("trace: %s: column %q has %d rows in a batch of %d", r.name, ColStack, idx.Len(), n)
	}
	if cap(r.stackBuf) < n {
		r.stackBuf = make([]StackID, n)
	}
	r.stackIDs = r.stackBuf[:n]
	vals := idx.Int32Values()
	if len(vals) < n {
		return fmt.Errorf("trace: %s: column %q is shorter than its batch", r.name, ColStack)
	}
	hasNulls := idx.NullN() > 0
	for i, v := range vals[:n] {
		if hasNulls && idx.IsNull(i) {
			r.stackIDs[i] = NoStack
			continue
		}
		if v < 0 || int(v) >= len(r.stacks) {
			return fmt.Errorf("trace: %s: row %d: stack index %d out of range", r.name, i, v)
		}
		r.stackIDs[i] = StackID(v)
	}
	return nil
}

// bindFrames extends the frame table with the new entries of the frame
// column's dictionary.
func (r *Reader) bindFrames(c arrow.Array) error {
	if c == nil {
		return fmt.Errorf("trace: %s: column %q holds frame ids but column %q, whose dictionary is the frame table, is missing", r.name, ColStack, ColFrame)
	}
	d, ok := c.(*array.Dictionary)
	if !ok {
		return fmt.Errorf("trace: %s: column %q must be dictionary-encoded strings", r.name, ColFrame)
	}
	dict, ok := d.Dictionary().(*array.String)
	if !ok {
		return fmt.Errorf("trace: %s: column %q must be dictionary-encoded strings", r.name, ColFrame)
	}
	if dict.Len() < len(r.frames) {
		r.frames = nil
	}
	for j := len(r.frames); j < dict.Len(); j++ {
		r.frames = append(r.frames, parseFrame(dict.Value(j)))
	}
	return nil
}

func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.done = true
}

// Event returns the current event. The pointer stays valid until Next.
func (r *Reader) Event() *Event { return &r.ev }

// Stack returns the stack with the given id, or nil for NoStack or an id not
// seen yet.
func (r *Reader) Stack(id StackID) Stack {
	if id < 0 || int(id) >= len(r.stacks) {
		return nil
	}
	return r.stacks[id]
}

// Stacks returns the stack table read so far, indexed by StackID. The table
// only grows by appending, so the slice stays valid, read-only, while the
// reader goes on: a pipeline may hand it to another goroutine along with
// the events read before it.
func (r *Reader) Stacks() []Stack { return r.stacks[:len(r.stacks):len(r.stacks)] }

// Err returns the first error met while reading, other than truncation.
func (r *Reader) Err() error { return r.err }

// Truncated reports, once Next has returned false, whether the stream ended
// without its end-of-stream marker (see ErrTruncated).
func (r *Reader) Truncated() bool { return r.cut }

// UnknownActions counts events whose action this version of tracer does not
// know; they are returned with Kind KindInvalid and should be skipped.
func (r *Reader) UnknownActions() int64 { return r.unknown }

// Close releases the reader and closes the file opened by Open.
func (r *Reader) Close() error {
	if r.ahead != nil {
		r.ahead.close()
	}
	r.ipc.Release()
	if r.file != nil {
		return r.file.Close()
	}
	return nil
}
