package trace

import (
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
)

// Column names. Units are in the names; trace/doc.go specifies each column.
const (
	ColSeq           = "seq"
	ColTimeUs        = "time_us"
	ColDevice        = "device"
	ColAction        = "action"
	ColAddr          = "addr"
	ColSizeBytes     = "size_bytes"
	ColStream        = "stream"
	ColPoolA         = "pool_a"
	ColPoolB         = "pool_b"
	ColStack         = "stack"
	ColFrame         = "frame"
	ColBlockBytes    = "block_size_bytes"
	ColReconstructed = "reconstructed"
	ColPendingFree   = "pending_free"
	ColDeviceUsed    = "device_used_bytes"
)

// Column indices in the schema this package writes. Readers look columns up
// by name instead, so files from other writers (or later versions) work.
const (
	idxSeq = iota
	idxTimeUs
	idxDevice
	idxAction
	idxAddr
	idxSize
	idxStream
	idxPoolA
	idxPoolB
	idxStack
	idxFrame
	idxBlock
	idxReconstructed
	idxPending
	idxDeviceUsed
	numCols
)

var (
	actionType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	// Format v2: a stack is the list of its frames' ids, innermost first;
	// the ids index the frame column's dictionary, the frame table.
	stackValueType = arrow.ListOf(arrow.PrimitiveTypes.Int32)
	stackType      = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: stackValueType}
	frameType      = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
)

func newSchema(meta *Meta) *arrow.Schema {
	keys, values := meta.keyValues()
	md := arrow.NewMetadata(keys, values)
	return arrow.NewSchema([]arrow.Field{
		idxSeq:           {Name: ColSeq, Type: arrow.PrimitiveTypes.Int64},
		idxTimeUs:        {Name: ColTimeUs, Type: arrow.PrimitiveTypes.Int64},
		idxDevice:        {Name: ColDevice, Type: arrow.PrimitiveTypes.Int32},
		idxAction:        {Name: ColAction, Type: actionType},
		idxAddr:          {Name: ColAddr, Type: arrow.PrimitiveTypes.Uint64},
		idxSize:          {Name: ColSizeBytes, Type: arrow.PrimitiveTypes.Int64},
		idxStream:        {Name: ColStream, Type: arrow.PrimitiveTypes.Uint64},
		idxPoolA:         {Name: ColPoolA, Type: arrow.PrimitiveTypes.Uint64},
		idxPoolB:         {Name: ColPoolB, Type: arrow.PrimitiveTypes.Uint64},
		idxStack:         {Name: ColStack, Type: stackType, Nullable: true},
		idxFrame:         {Name: ColFrame, Type: frameType, Nullable: true},
		idxBlock:         {Name: ColBlockBytes, Type: arrow.PrimitiveTypes.Int64},
		idxReconstructed: {Name: ColReconstructed, Type: arrow.FixedWidthTypes.Boolean},
		idxPending:       {Name: ColPendingFree, Type: arrow.FixedWidthTypes.Boolean},
		idxDeviceUsed:    {Name: ColDeviceUsed, Type: arrow.PrimitiveTypes.Int64},
	}, &md)
}

// FormatStack renders a stack as text: one frame per line (FormatFrame),
// innermost first. Format v1 traces stored each stack so; v2 stores frames
// once and stacks as lists of frame ids, and this is a stack's text as
// doc.go shows how to rebuild it from pyarrow, polars or DuckDB.
func FormatStack(s Stack) string {
	var b strings.Builder
	for i, f := range s {
		if i > 0 {
			b.WriteByte('\n')
		}
		writeFrame(&b, f)
	}
	return b.String()
}

// ParseStack is the inverse of FormatStack. Malformed lines keep their text
// as the frame name, so a foreign file never fails to load over a stack.
func ParseStack(s string) Stack {
	if s == "" {
		return Stack{}
	}
	lines := strings.Split(s, "\n")
	st := make(Stack, len(lines))
	for i, ln := range lines {
		st[i] = parseFrame(ln)
	}
	return st
}

func clean(s string) string {
	if strings.ContainsAny(s, "\t\n") {
		return strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
	}
	return s
}
