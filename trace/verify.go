package trace

import (
	"encoding/binary"
	"errors"
)

// arrow-go decodes IPC message metadata (flatbuffers) without verifying it,
// and sizes slices from vector lengths found in the file: a corrupt length
// makes it allocate gigabytes. verifyMessage checks every table, vector and
// string reachable from a Message against the buffer bounds first, for the
// message types a trace contains (Schema, DictionaryBatch, RecordBatch).

var errBadMetadata = errors.New("corrupt IPC message metadata")

type fbuf []byte

func (b fbuf) u32(pos int) (uint32, bool) {
	if pos < 0 || pos+4 > len(b) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[pos:]), true
}

func (b fbuf) u16(pos int) (uint16, bool) {
	if pos < 0 || pos+2 > len(b) {
		return 0, false
	}
	return binary.LittleEndian.Uint16(b[pos:]), true
}

// field returns the absolute position of field i of the table at tab, or -1
// when absent; ok is false when the table is malformed.
func (b fbuf) field(tab, i int) (pos int, ok bool) {
	so, ok := b.u32(tab)
	if !ok {
		return 0, false
	}
	vt := tab - int(int32(so))
	vtSize, ok1 := b.u16(vt)
	_, ok2 := b.u16(vt + 2)
	if !ok1 || !ok2 || vtSize < 4 || vt+int(vtSize) > len(b) {
		return 0, false
	}
	if 4+2*i+2 > int(vtSize) {
		return -1, true
	}
	off, _ := b.u16(vt + 4 + 2*i)
	if off == 0 {
		return -1, true
	}
	return tab + int(off), true
}

// ref follows the offset stored at field i of the table at tab.
func (b fbuf) ref(tab, i int) (target int, present, ok bool) {
	pos, ok := b.field(tab, i)
	if !ok || pos < 0 {
		return 0, false, ok
	}
	off, ok := b.u32(pos)
	if !ok {
		return 0, false, false
	}
	target = pos + int(off)
	return target, true, target >= 0 && target < len(b)
}

// vector checks the vector at field i and returns its element count and the
// position of its first element.
func (b fbuf) vector(tab, i, elemSize int) (n, start int, ok bool) {
	v, present, ok := b.ref(tab, i)
	if !ok || !present {
		return 0, 0, ok
	}
	l, ok := b.u32(v)
	if !ok || int64(l)*int64(elemSize) > int64(len(b)-v-4) {
		return 0, 0, false
	}
	return int(l), v + 4, true
}

// tables checks a vector of tables at field i, calling each on every element.
func (b fbuf) tables(tab, i int, each func(int) bool) bool {
	n, start, ok := b.vector(tab, i, 4)
	if !ok {
		return false
	}
	for j := 0; j < n; j++ {
		p := start + 4*j
		off, _ := b.u32(p)
		if t := p + int(off); t >= len(b) || !each(t) {
			return false
		}
	}
	return true
}

func (b fbuf) table(tab, i int, each func(int) bool) bool {
	t, present, ok := b.ref(tab, i)
	if !ok {
		return false
	}
	return !present || each(t)
}

func (b fbuf) keyValue(t int) bool {
	_, _, ok1 := b.vector(t, 0, 1)
	_, _, ok2 := b.vector(t, 1, 1)
	return ok1 && ok2
}

func (b fbuf) anyTable(t int) bool { _, ok := b.field(t, 0); return ok }

func (b fbuf) fieldTable(depth int) func(int) bool {
	return func(t int) bool {
		if depth > 64 {
			return false
		}
		_, _, ok := b.vector(t, 0, 1) // name
		return ok &&
			b.table(t, 3, b.anyTable) && // type
			b.table(t, 4, func(d int) bool { return b.table(d, 1, b.anyTable) }) && // dictionary
			b.tables(t, 5, b.fieldTable(depth+1)) && // children
			b.tables(t, 6, b.keyValue)
	}
}

func (b fbuf) recordBatch(t int) bool {
	_, _, ok1 := b.vector(t, 1, 16) // nodes
	_, _, ok2 := b.vector(t, 2, 16) // buffers
	_, _, ok3 := b.vector(t, 4, 8)  // variadic buffer counts
	return ok1 && ok2 && ok3 && b.table(t, 3, b.anyTable)
}

// verifyMessage checks one IPC message's metadata flatbuffer.
func verifyMessage(meta []byte) error {
	b := fbuf(meta)
	root, ok := b.u32(0)
	if !ok || int(root) >= len(b) {
		return errBadMetadata
	}
	msg := int(root)
	typPos, ok := b.field(msg, 1)
	if !ok {
		return errBadMetadata
	}
	typ := byte(0)
	if typPos >= 0 && typPos < len(b) {
		typ = b[typPos]
	}
	var header func(int) bool
	switch typ {
	case 1: // Schema
		header = func(t int) bool {
			_, _, ok := b.vector(t, 3, 8)
			return ok && b.tables(t, 1, b.fieldTable(0)) && b.tables(t, 2, b.keyValue)
		}
	case 2: // DictionaryBatch
		header = func(t int) bool { return b.table(t, 1, b.recordBatch) }
	case 3: // RecordBatch
		header = b.recordBatch
	default:
		header = b.anyTable
	}
	if !b.table(msg, 2, header) || !b.tables(msg, 4, b.keyValue) {
		return errBadMetadata
	}
	return nil
}
