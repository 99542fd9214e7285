package trace_test

import (
	"bytes"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/tracer-dev/tracer/trace"
)

// A trace from another producer may have only the required columns (and
// its dictionary in another order); the optional ones take their defaults.
func TestReader_requiredColumnsOnly(t *testing.T) {
	mem := memory.NewGoAllocator()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
	md := arrow.NewMetadata([]string{trace.MetaFormat, trace.MetaVersion}, []string{trace.FormatName, "1"})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: trace.ColAction, Type: dt},
		{Name: trace.ColAddr, Type: arrow.PrimitiveTypes.Uint64},
		{Name: trace.ColSizeBytes, Type: arrow.PrimitiveTypes.Int64},
	}, &md)
	db := array.NewStringBuilder(mem)
	db.AppendValues([]string{"free_requested", "alloc", "user_annotation"}, nil)
	dict := db.NewArray()
	ib := array.NewInt16Builder(mem)
	ib.AppendValues([]int16{1, 0, 2}, nil)
	idx := ib.NewArray()
	ab := array.NewUint64Builder(mem)
	ab.AppendValues([]uint64{0x1000, 0x1000, 0}, nil)
	sb := array.NewInt64Builder(mem)
	sb.AppendValues([]int64{512, 512, 0}, nil)
	cols := []arrow.Array{array.NewDictionaryArray(dt, idx, dict), ab.NewArray(), sb.NewArray()}
	rec := array.NewRecord(schema, cols, 3)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()

	rd, err := trace.NewReader(bytes.NewReader(buf.Bytes()), "foreign")
	if err != nil {
		t.Fatal(err)
	}
	var got []trace.Event
	for rd.Next() {
		got = append(got, *rd.Event())
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	want := []trace.Event{
		{Seq: 0, Kind: trace.KindAlloc, Addr: 0x1000, Size: 512, Stack: trace.NoStack},
		{Seq: 1, Kind: trace.KindFreeRequested, Addr: 0x1000, Size: 512, Stack: trace.NoStack},
		{Seq: 2, Kind: trace.KindInvalid, Stack: trace.NoStack},
	}
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if rd.UnknownActions() != 1 {
		t.Errorf("UnknownActions = %d, want 1", rd.UnknownActions())
	}
}

// A foreign trace with nulls in a column that may have none is refused
// with an error that says so, not one that names the column's own type.
func TestReader_nulls(t *testing.T) {
	mem := memory.NewGoAllocator()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	md := arrow.NewMetadata([]string{trace.MetaFormat, trace.MetaVersion}, []string{trace.FormatName, "1"})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: trace.ColAction, Type: dt},
		{Name: trace.ColAddr, Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: trace.ColSizeBytes, Type: arrow.PrimitiveTypes.Int64},
	}, &md)
	db := array.NewStringBuilder(mem)
	db.AppendValues([]string{"alloc"}, nil)
	ib := array.NewInt8Builder(mem)
	ib.AppendValues([]int8{0, 0}, nil)
	ab := array.NewUint64Builder(mem)
	ab.AppendValues([]uint64{0x1000, 0}, []bool{true, false})
	sb := array.NewInt64Builder(mem)
	sb.AppendValues([]int64{512, 512}, nil)
	cols := []arrow.Array{array.NewDictionaryArray(dt, ib.NewArray(), db.NewArray()), ab.NewArray(), sb.NewArray()}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(array.NewRecord(schema, cols, 2)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rd, err := trace.NewReader(bytes.NewReader(buf.Bytes()), "nulls.arrows")
	if err != nil {
		t.Fatal(err)
	}
	for rd.Next() {
	}
	want := `trace: nulls.arrows: column "addr" has 1 null values in a batch of 2 rows; it must have none`
	if err := rd.Err(); err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
