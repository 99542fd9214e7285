package trace

import "encoding/binary"

// SetWriteVersion makes writers stamp v until the returned func is called.
func SetWriteVersion(v Version) (restore func()) {
	old := writeVersion
	writeVersion = v
	return func() { writeVersion = old }
}

// SetLayoutPart makes WriteEvents lay out rows in parts of at least n rows
// until the returned func is called.
func SetLayoutPart(n int) (restore func()) {
	old := layoutPart
	layoutPart = n
	return func() { layoutPart = old }
}

// BreakStreamFile closes a StreamWriter's file under it: every write fails
// from then on.
func BreakStreamFile(s *StreamWriter) { s.pf.f.Close() }

// SetParquetGroupRows makes WriteParquet write row groups of n rows until
// the returned func is called.
func SetParquetGroupRows(n int) (restore func()) {
	old := parquetGroupRows
	parquetGroupRows = n
	return func() { parquetGroupRows = old }
}

// ScanAnnotations is the fast reader of tracer.annotations; ok is false
// where it leaves the text to encoding/json.
var ScanAnnotations = scanAnnotations

// MessageHeader is messageHeader, for a test that walks a stream's
// messages.
func MessageHeader(meta []byte) (typ byte, body int64) {
	typ, body, _ = messageHeader(meta)
	return typ, body
}

// BufferAt returns the offset in its body of buffer i of the record batch
// message whose metadata is meta.
func BufferAt(meta []byte, i int) int64 {
	b := fbuf(meta)
	root, _ := b.u32(0)
	rb, _, _ := b.ref(int(root), 2)
	_, start, _ := b.vector(rb, 2, 16)
	return int64(binary.LittleEndian.Uint64(b[start+16*i:]))
}

// AppendFrame is appendFrame, which the stack table formats frames with.
var AppendFrame = appendFrame

// EncodeAnnotations is encodeAnnotations.
var EncodeAnnotations = encodeAnnotations
