package trace

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
