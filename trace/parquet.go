package trace

import (
	"context"
	"io"
	"sync"

	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/apache/arrow/go/v15/parquet/schema"
)

// Parquet column names: the trace's own columns (doc.go) keep their names;
// these are the ones an export adds. ParquetColumns lists them all in order.
const (
	ColAllocSeq  = "alloc_seq"
	ColStackID   = "stack_id"
	ColFrameName = "frame_name"
	ColFrameFile = "frame_file"
	ColFrameLine = "frame_line"
	ColStackText = "stack_text"
)

// ParquetColumns are the columns of an exported Parquet file, in order
// (doc.go, "Parquet export", specifies each).
var ParquetColumns = []string{
	ColSeq, ColTimeUs, ColDevice, ColAction, ColAddr, ColSizeBytes, ColStream, ColPoolA, ColPoolB,
	ColBlockBytes, ColReconstructed, ColPendingFree, ColDeviceUsed,
	ColAllocSeq, ColStackID, ColFrameName, ColFrameFile, ColFrameLine, ColStackText,
}

// parquetGroupRows is the rows of one Parquet row group: memory is bounded
// by a group however long the trace, and DuckDB reads groups in parallel.
var parquetGroupRows = 1 << 18

// ParquetStats says what WriteParquet wrote.
type ParquetStats struct {
	Rows      int64
	RowGroups int
	Paired    int64 // free rows whose alloc_seq was found
}

// WriteParquet writes every event rd has left to w as one flat Parquet table
// (the columns of ParquetColumns), with the trace's metadata as the file's
// key/value metadata. Each free_requested and free_completed row gets its
// block's alloc seq, so pairing needs no address matching; each event's
// stack is both flattened (its innermost frame) and whole as text, which
// Parquet stores once per row group by its dictionary encoding. It stops
// with ctx's error when ctx is done.
func WriteParquet(ctx context.Context, w io.Writer, rd *Reader) (ParquetStats, error) {
	var st ParquetStats
	meta := rd.Meta()
	keys, values := meta.keyValues()
	// Data pages of 8 MiB: arrow-go makes a new zstd encoder for every
	// page it compresses, whose buffers dominate the work with small pages.
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCreatedBy("tracer (github.com/tracer-dev/tracer)"),
		parquet.WithDictionaryDefault(false),
		parquet.WithDictionaryFor(ColAction, true),
		parquet.WithDictionaryFor(ColFrameName, true),
		parquet.WithDictionaryFor(ColFrameFile, true),
		parquet.WithDictionaryFor(ColStackText, true),
		parquet.WithDictionaryPageSizeLimit(64<<20),
		parquet.WithDataPageSize(8<<20),
	)
	pw := file.NewParquetWriter(w, parquetSchema(), file.WithWriterProps(props))
	for i := range keys {
		if err := pw.AppendKeyValueMetadata(keys[i], values[i]); err != nil {
			return st, err
		}
	}
	var (
		buf  parquetBuf
		live = map[blockKey]int64{} // live blocks: the seq of their alloc
		// The text of the group's stacks and their innermost frames, made
		// once a stack a group: Parquet's dictionaries are per group too.
		texts = map[StackID]stackBytes{}
	)
	flush := func() error {
		if buf.n == 0 {
			return nil
		}
		if err := buf.write(pw.AppendRowGroup()); err != nil {
			return err
		}
		st.Rows += int64(buf.n)
		st.RowGroups++
		buf.reset()
		clear(texts)
		return ctx.Err()
	}
	for rd.Next() {
		ev := rd.Event()
		allocSeq := int64(-1)
		k := blockKey{ev.Device, ev.Addr}
		switch ev.Kind {
		case KindAlloc:
			live[k], allocSeq = ev.Seq, ev.Seq
		case KindFreeRequested, KindFreeCompleted:
			if s, ok := live[k]; ok {
				allocSeq = s
				st.Paired++
			}
			if ev.Kind == KindFreeCompleted {
				delete(live, k)
			}
		}
		sb, ok := texts[ev.Stack]
		if !ok && ev.Stack != NoStack {
			sb = newStackBytes(rd.Stack(ev.Stack))
			texts[ev.Stack] = sb
		}
		buf.add(ev, allocSeq, &sb)
		if buf.n == parquetGroupRows {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	if err := rd.Err(); err != nil {
		return st, err
	}
	if err := flush(); err != nil {
		return st, err
	}
	return st, pw.Close()
}

// stackBytes is a stack as the export writes it: its text, and its
// innermost frame (hasFrame false for an empty stack).
type stackBytes struct {
	text, name, file parquet.ByteArray
	line             int32
	hasFrame         bool
}

func newStackBytes(st Stack) stackBytes {
	sb := stackBytes{text: parquet.ByteArray(FormatStack(st))}
	if len(st) > 0 {
		f := st[0]
		sb.name, sb.file, sb.line, sb.hasFrame = parquet.ByteArray(f.Name), parquet.ByteArray(f.File), f.Line, true
	}
	return sb
}

type blockKey struct {
	device int32
	addr   uint64
}

// parquetSchema is the exported table's schema; unsigned handles use
// Parquet's unsigned integer logical type, strings its String type.
func parquetSchema() *schema.GroupNode {
	req, opt := parquet.Repetitions.Required, parquet.Repetitions.Optional
	i64 := func(name string, rep parquet.Repetition) schema.Node { return schema.NewInt64Node(name, rep, -1) }
	i32 := func(name string, rep parquet.Repetition) schema.Node { return schema.NewInt32Node(name, rep, -1) }
	u64 := func(name string) schema.Node {
		return schema.MustPrimitive(schema.NewPrimitiveNodeLogical(name, req, schema.NewIntLogicalType(64, false), parquet.Types.Int64, -1, -1))
	}
	str := func(name string, rep parquet.Repetition) schema.Node {
		return schema.MustPrimitive(schema.NewPrimitiveNodeLogical(name, rep, schema.StringLogicalType{}, parquet.Types.ByteArray, -1, -1))
	}
	boolean := func(name string) schema.Node { return schema.NewBooleanNode(name, req, -1) }
	fields := schema.FieldList{
		i64(ColSeq, req), i64(ColTimeUs, req), i32(ColDevice, req), str(ColAction, req),
		u64(ColAddr), i64(ColSizeBytes, req), u64(ColStream), u64(ColPoolA), u64(ColPoolB),
		i64(ColBlockBytes, req), boolean(ColReconstructed), boolean(ColPendingFree), i64(ColDeviceUsed, req),
		i64(ColAllocSeq, opt), i32(ColStackID, opt), str(ColFrameName, opt), str(ColFrameFile, opt),
		i32(ColFrameLine, opt), str(ColStackText, opt),
	}
	return schema.MustGroup(schema.NewGroupNode("schema", req, fields, -1))
}

// parquetBuf holds one row group's columns. Optional columns keep their
// values dense, with a definition level (1 = present, 0 = null) per row.
type parquetBuf struct {
	n                                         int
	seq, time, size, block, used              []int64
	addr, stream, poolA, poolB                []int64 // the uint64s' bits
	device, sid, line                         []int32
	action, frameName, frameFile, text        []parquet.ByteArray
	recon, pending                            []bool
	allocSeq                                  []int64
	allocDefs, stackDefs, frameDefs, lineDefs []int16
}

// actionBytes are the action column's values, made at the first export, not
// at package init.
var actionBytes = sync.OnceValue(func() map[Kind]parquet.ByteArray {
	m := map[Kind]parquet.ByteArray{}
	for k := Kind(0); k < numKinds; k++ {
		m[k] = parquet.ByteArray(k.String())
	}
	return m
})

func (b *parquetBuf) add(ev *Event, allocSeq int64, sb *stackBytes) {
	b.n++
	b.seq = append(b.seq, ev.Seq)
	b.time = append(b.time, ev.TimeUs)
	b.device = append(b.device, ev.Device)
	b.action = append(b.action, actionBytes()[ev.Kind])
	b.addr = append(b.addr, int64(ev.Addr))
	b.size = append(b.size, ev.Size)
	b.stream = append(b.stream, int64(ev.Stream))
	b.poolA = append(b.poolA, int64(ev.Pool.A))
	b.poolB = append(b.poolB, int64(ev.Pool.B))
	b.block = append(b.block, ev.BlockSize)
	b.recon = append(b.recon, ev.Flags&FlagReconstructed != 0)
	b.pending = append(b.pending, ev.Flags&FlagPending != 0)
	b.used = append(b.used, ev.DeviceUsed)
	if allocSeq >= 0 {
		b.allocSeq = append(b.allocSeq, allocSeq)
		b.allocDefs = append(b.allocDefs, 1)
	} else {
		b.allocDefs = append(b.allocDefs, 0)
	}
	if ev.Stack == NoStack {
		b.stackDefs = append(b.stackDefs, 0)
		b.frameDefs = append(b.frameDefs, 0)
		b.lineDefs = append(b.lineDefs, 0)
		return
	}
	b.sid = append(b.sid, int32(ev.Stack))
	b.stackDefs = append(b.stackDefs, 1)
	b.text = append(b.text, sb.text)
	if !sb.hasFrame {
		b.frameDefs = append(b.frameDefs, 0)
		b.lineDefs = append(b.lineDefs, 0)
		return
	}
	b.frameDefs = append(b.frameDefs, 1)
	b.frameName = append(b.frameName, sb.name)
	b.frameFile = append(b.frameFile, sb.file)
	if sb.line >= 0 {
		b.line = append(b.line, sb.line)
		b.lineDefs = append(b.lineDefs, 1)
	} else {
		b.lineDefs = append(b.lineDefs, 0)
	}
}

func (b *parquetBuf) reset() {
	*b = parquetBuf{
		seq: b.seq[:0], time: b.time[:0], size: b.size[:0], block: b.block[:0], used: b.used[:0],
		addr: b.addr[:0], stream: b.stream[:0], poolA: b.poolA[:0], poolB: b.poolB[:0],
		device: b.device[:0], action: b.action[:0], recon: b.recon[:0], pending: b.pending[:0],
		allocSeq: b.allocSeq[:0], allocDefs: b.allocDefs[:0], sid: b.sid[:0], stackDefs: b.stackDefs[:0],
		frameName: b.frameName[:0], frameFile: b.frameFile[:0], frameDefs: b.frameDefs[:0],
		line: b.line[:0], lineDefs: b.lineDefs[:0], text: b.text[:0],
	}
}

// write writes the buffered rows as one row group, columns in
// ParquetColumns order.
func (b *parquetBuf) write(rg file.SerialRowGroupWriter) error {
	cols := []func(file.ColumnChunkWriter) error{
		i64Col(b.seq, nil), i64Col(b.time, nil), i32Col(b.device, nil), strCol(b.action, nil),
		i64Col(b.addr, nil), i64Col(b.size, nil), i64Col(b.stream, nil), i64Col(b.poolA, nil), i64Col(b.poolB, nil),
		i64Col(b.block, nil), boolCol(b.recon), boolCol(b.pending), i64Col(b.used, nil),
		i64Col(b.allocSeq, b.allocDefs), i32Col(b.sid, b.stackDefs), strCol(b.frameName, b.frameDefs),
		strCol(b.frameFile, b.frameDefs), i32Col(b.line, b.lineDefs), strCol(b.text, b.stackDefs),
	}
	for _, write := range cols {
		cw, err := rg.NextColumn()
		if err != nil {
			return err
		}
		if err := write(cw); err != nil {
			return err
		}
		if err := cw.Close(); err != nil {
			return err
		}
	}
	return rg.Close()
}

func i64Col(v []int64, defs []int16) func(file.ColumnChunkWriter) error {
	return func(cw file.ColumnChunkWriter) error {
		_, err := cw.(*file.Int64ColumnChunkWriter).WriteBatch(v, defs, nil)
		return err
	}
}

func i32Col(v []int32, defs []int16) func(file.ColumnChunkWriter) error {
	return func(cw file.ColumnChunkWriter) error {
		_, err := cw.(*file.Int32ColumnChunkWriter).WriteBatch(v, defs, nil)
		return err
	}
}

func strCol(v []parquet.ByteArray, defs []int16) func(file.ColumnChunkWriter) error {
	return func(cw file.ColumnChunkWriter) error {
		_, err := cw.(*file.ByteArrayColumnChunkWriter).WriteBatch(v, defs, nil)
		return err
	}
}

func boolCol(v []bool) func(file.ColumnChunkWriter) error {
	return func(cw file.ColumnChunkWriter) error {
		_, err := cw.(*file.BooleanColumnChunkWriter).WriteBatch(v, nil, nil)
		return err
	}
}
