package trace

import (
	"bytes"
	"encoding/binary"
	"os"
	"sync"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
)

// batchCols reads a record batch of a trace in exactly the schema this
// package writes straight from the file into events, a chunk of rows at a
// time, for DecodeAhead's workers: where Arrow's reader copies the batch's
// body twice (the read, then each buffer), this reads each column's bytes
// for the chunk once and holds only them. bind checks the batch's layout
// and every value the plain Reader checks (the action and stack indices)
// before a row is served, so a batch it takes gives the plain Reader's
// events, and one it refuses is left to the plain Reader whole.
type batchCols struct {
	rows   int
	val    [numCols]int64 // file offset of each column's values
	valid  int64          // of the stack column's validity bitmap; -1 when none
	kinds  []Kind         // the action dictionary's kinds
	action []int8         // every row's action index (checked)
	stack  []StackID      // every row's stack (checked; NoStack where null)
	buf    []byte
	served int   // rows read into events
	err    error // a read that failed
}

// field64 is where in an Event each column of 8-byte values goes (the
// signed ones as their bits).
var field64 = [numCols]uintptr{
	idxSeq: unsafe.Offsetof(Event{}.Seq), idxTimeUs: unsafe.Offsetof(Event{}.TimeUs), idxAddr: unsafe.Offsetof(Event{}.Addr),
	idxSize: unsafe.Offsetof(Event{}.Size), idxStream: unsafe.Offsetof(Event{}.Stream),
	idxPoolA: unsafe.Offsetof(Event{}.Pool) + unsafe.Offsetof(PoolID{}.A), idxPoolB: unsafe.Offsetof(Event{}.Pool) + unsafe.Offsetof(PoolID{}.B),
	idxBlock: unsafe.Offsetof(Event{}.BlockSize), idxDeviceUsed: unsafe.Offsetof(Event{}.DeviceUsed),
}

// bytesPerRow is each column's bytes a row; 0 for a bitmap.
var bytesPerRow = [numCols]int64{
	idxSeq: 8, idxTimeUs: 8, idxDevice: 4, idxAction: 1, idxAddr: 8, idxSize: 8, idxStream: 8,
	idxPoolA: 8, idxPoolB: 8, idxStack: 4, idxFrame: 4, idxBlock: 8, idxReconstructed: 0, idxPending: 0, idxDeviceUsed: 8,
}

// exactSchema reports whether s is the schema this package writes (field
// names, types and nullability; metadata aside), whose record batches
// batchCols reads.
func exactSchema(s *arrow.Schema) bool {
	want := newSchema(&Meta{})
	if s.NumFields() != want.NumFields() {
		return false
	}
	for i, f := range want.Fields() {
		g := s.Field(i)
		if g.Name != f.Name || g.Nullable != f.Nullable || !arrow.TypeEqual(g.Type, f.Type) {
			return false
		}
	}
	return true
}

// bind takes the record batch of sp in f, with the dictionaries of dicts, and
// reports whether batchCols reads it: its layout is the one this package
// writes (one node a column, two buffers, no compression, nulls only in
// stack and frame, every buffer long enough and inside the body), and its
// action and stack indices are in range.
func (c *batchCols) bind(f *os.File, sp msgSpan, dicts *Reader) bool {
	c.served, c.err = 0, nil
	b := fbuf(sp.meta)
	root, _ := b.u32(0)
	rb, present, ok := b.ref(int(root), 2)
	if !ok || !present {
		return false
	}
	var n int64
	if pos, ok := b.field(rb, 0); !ok {
		return false
	} else if pos >= 0 {
		if pos+8 > len(b) {
			return false
		}
		n = int64(binary.LittleEndian.Uint64(b[pos:]))
	}
	nn, nodes, ok1 := b.vector(rb, 1, 16)
	nb, bufs, ok2 := b.vector(rb, 2, 16)
	comp, ok3 := b.field(rb, 3)
	if !ok1 || !ok2 || !ok3 || comp >= 0 || nn != numCols || nb != 2*numCols || n <= 0 || n > 1<<30 {
		return false
	}
	at := func(p int) int64 { return int64(binary.LittleEndian.Uint64(b[p:])) }
	body := sp.off + 8 + int64(len(sp.meta))
	bodyLen := sp.n - 8 - int64(len(sp.meta))
	bits := (n + 7) / 8
	c.valid = -1
	for col := range numCols {
		if at(nodes+16*col) != n {
			return false
		}
		nulls := at(nodes + 16*col + 8)
		vOff, vLen := at(bufs+32*col), at(bufs+32*col+8)
		off, blen := at(bufs+32*col+16), at(bufs+32*col+24)
		if vOff < 0 || vLen < 0 || off < 0 || blen < 0 || vOff > bodyLen || vLen > bodyLen-vOff || off > bodyLen || blen > bodyLen-off {
			return false
		}
		want := n * bytesPerRow[col]
		if want == 0 {
			want = bits
		}
		if blen < want {
			return false
		}
		switch {
		case nulls == 0 && vLen == 0:
		case nulls > 0 && nulls <= n && (col == idxStack || col == idxFrame) && vLen >= bits:
			if col == idxStack {
				c.valid = body + vOff
			}
		default:
			return false
		}
		c.val[col] = body + off
	}
	c.rows = int(n)
	c.kinds = dicts.kindOfIdx
	// The action and stack indices, checked as the plain Reader does.
	c.action = growTo(c.action, c.rows)
	if !c.pread(f, c.val[idxAction], n) {
		return false
	}
	for i, j := range c.buf[:n] {
		if int8(j) < 0 || int(int8(j)) >= len(c.kinds) {
			return false
		}
		c.action[i] = int8(j)
	}
	c.stack = growTo(c.stack, c.rows)
	var valid []byte
	if c.valid >= 0 {
		if !c.pread(f, c.valid, bits) {
			return false
		}
		valid = append([]byte(nil), c.buf[:bits]...)
	}
	if !c.pread(f, c.val[idxStack], 4*n) {
		return false
	}
	nstacks := len(dicts.stacks)
	for i := range c.rows {
		if valid != nil && valid[i>>3]&(1<<(i&7)) == 0 {
			c.stack[i] = NoStack
			continue
		}
		v := int32(binary.LittleEndian.Uint32(c.buf[4*i:]))
		if v < 0 || int(v) >= nstacks {
			return false
		}
		c.stack[i] = StackID(v)
	}
	for _, j := range c.action[:c.rows] {
		if c.kinds[j] == KindInvalid {
			dicts.unknown++
		}
	}
	return true
}

// pread reads n bytes at off of f into c.buf.
func (c *batchCols) pread(f *os.File, off, n int64) bool {
	c.buf = growTo(c.buf, int(n))
	if _, err := f.ReadAt(c.buf, off); err != nil {
		c.err = err
		return false
	}
	return true
}

// read decodes rows [lo, lo+len(evs)) of the bound batch into evs, every
// field as Reader.fill sets it; lo is a multiple of 8. After a failed read
// c.err says why.
func (c *batchCols) read(f *os.File, lo int, evs []Event) bool {
	n := int64(len(evs))
	l := int64(lo)
	le := binary.LittleEndian
	for col := range numCols {
		w := bytesPerRow[col]
		switch col {
		case idxAction, idxStack, idxFrame:
			continue // from bind, or not an Event's
		case idxReconstructed, idxPending:
			if !c.pread(f, c.val[col]+l/8, (n+7)/8) {
				return false
			}
			flag := FlagReconstructed
			if col == idxPending {
				flag = FlagPending
			}
			for i := range evs {
				if c.buf[i>>3]&(1<<(i&7)) != 0 {
					evs[i].Flags |= flag
				}
			}
			continue
		}
		if !c.pread(f, c.val[col]+l*w, n*w) {
			return false
		}
		p := c.buf
		if col == idxDevice {
			for i := range evs {
				evs[i].Device = int32(le.Uint32(p[4*i:]))
			}
			continue
		}
		off := field64[col]
		for i := range evs {
			*(*uint64)(unsafe.Add(unsafe.Pointer(&evs[i]), off)) = le.Uint64(p[8*i:])
		}
	}
	c.served += len(evs)
	return true
}

// start clears the fields read does not set of rows [lo, lo+len(evs)):
// their kinds and stacks from bind, no flags, Ref 0.
func (c *batchCols) start(lo int, evs []Event) {
	for i := range evs {
		e := &evs[i]
		e.Kind = c.kinds[c.action[lo+i]]
		e.Stack = c.stack[lo+i]
		e.Flags = 0
		e.Ref = 0
	}
}

var noRows struct {
	once sync.Once
	msg  []byte
	ok   bool
}

// noRowsBatch returns the message of a record batch of no rows in the
// schema this package writes, as its writer writes it: what a
// DecodeAhead worker's Reader of the dictionaries reads in place of each
// of its batches.
func noRowsBatch() ([]byte, bool) {
	noRows.once.Do(func() {
		var buf bytes.Buffer
		if NewWriter(&buf, Meta{}, WriterOptions{}).Close() != nil {
			return
		}
		data := buf.Bytes()
		spans, ok := scanMessages(bytes.NewReader(data), int64(len(data)))
		if !ok {
			return
		}
		for _, s := range spans {
			if s.typ == 3 {
				noRows.msg, noRows.ok = data[s.off:s.off+s.n], true
			}
		}
	})
	return noRows.msg, noRows.ok
}
