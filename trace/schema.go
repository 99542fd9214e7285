package trace

import (
	"strconv"
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
	idxBlock
	idxReconstructed
	idxPending
	idxDeviceUsed
	numCols
)

var (
	actionType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	stackType  = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
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
		idxBlock:         {Name: ColBlockBytes, Type: arrow.PrimitiveTypes.Int64},
		idxReconstructed: {Name: ColReconstructed, Type: arrow.FixedWidthTypes.Boolean},
		idxPending:       {Name: ColPendingFree, Type: arrow.FixedWidthTypes.Boolean},
		idxDeviceUsed:    {Name: ColDeviceUsed, Type: arrow.PrimitiveTypes.Int64},
	}, &md)
}

// FormatStack renders a stack as the trace stores it: one frame per line,
// innermost first, each "name<TAB>file<TAB>line", line "?" when unknown. Tabs and newlines inside
// names and file names become spaces, so the encoding is unambiguous.
func FormatStack(s Stack) string {
	var b strings.Builder
	for i, f := range s {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(clean(f.Name))
		b.WriteByte('\t')
		b.WriteString(clean(f.File))
		b.WriteByte('\t')
		if f.Line < 0 {
			b.WriteByte('?')
		} else {
			b.WriteString(strconv.Itoa(int(f.Line)))
		}
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
		parts := strings.Split(ln, "\t")
		if len(parts) != 3 {
			st[i] = Frame{Name: ln}
			continue
		}
		line := UnknownLine
		if n, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
			line = LineOf(n)
		}
		st[i] = Frame{Name: parts[0], File: parts[1], Line: line}
	}
	return st
}

func clean(s string) string {
	if strings.ContainsAny(s, "\t\n") {
		return strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
	}
	return s
}
