package trace_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/tracer-dev/tracer/trace"
)

// The schema doc.go documents under "Parquet export": name, physical type,
// logical type (as the reader prints it), nullable.
var parquetSchema = []struct {
	name, physical, logical string
	nullable                bool
}{
	{"seq", "INT64", "None", false},
	{"time_us", "INT64", "None", false},
	{"device", "INT32", "None", false},
	{"action", "BYTE_ARRAY", "String", false},
	{"addr", "INT64", "Int(bitWidth=64, isSigned=false)", false},
	{"size_bytes", "INT64", "None", false},
	{"stream", "INT64", "Int(bitWidth=64, isSigned=false)", false},
	{"pool_a", "INT64", "Int(bitWidth=64, isSigned=false)", false},
	{"pool_b", "INT64", "Int(bitWidth=64, isSigned=false)", false},
	{"block_size_bytes", "INT64", "None", false},
	{"reconstructed", "BOOLEAN", "None", false},
	{"pending_free", "BOOLEAN", "None", false},
	{"device_used_bytes", "INT64", "None", false},
	{"alloc_seq", "INT64", "None", true},
	{"stack_id", "INT32", "None", true},
	{"frame_name", "BYTE_ARRAY", "String", true},
	{"frame_file", "BYTE_ARRAY", "String", true},
	{"frame_line", "INT32", "None", true},
	{"stack_text", "BYTE_ARRAY", "String", true},
}

// parquetTrace writes a small trace: a segment, a block with a stack freed
// in two steps, a block without a stack that stays live, a second block at
// the first one's address, and an OOM.
func parquetTrace(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := trace.NewWriter(&buf, meta(), trace.WriterOptions{BatchRows: 3})
	fwd := w.AddStack(trace.Stack{{Name: "forward", File: "model.py", Line: 12}, {Name: "<module>", File: "train.py", Line: 3}})
	unk := w.AddStack(trace.Stack{{Name: "step", File: "adam.py", Line: trace.UnknownLine}})
	empty := w.AddStack(trace.Stack{})
	const a = 0x7f0000000000
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: a, Size: 2 << 20, Stack: fwd},
		{Kind: trace.KindAlloc, Addr: a, Size: 1000, BlockSize: 1024, Stack: fwd, Stream: 1 << 63},
		{Kind: trace.KindAlloc, Addr: a + 1024, Size: 512, Stack: trace.NoStack, Device: 0},
		{Kind: trace.KindFreeRequested, Addr: a, Size: 1000, Stack: unk},
		{Kind: trace.KindFreeCompleted, Addr: a, Size: 1000, Stack: unk},
		{Kind: trace.KindAlloc, Addr: a, Size: 100, Stack: empty},
		{Kind: trace.KindFreeRequested, Addr: a, Size: 100, Stack: empty},
		{Kind: trace.KindFreeRequested, Addr: a + 4096, Size: 7, Stack: trace.NoStack}, // no alloc in the trace
		{Kind: trace.KindOOM, Addr: 5 << 30, Size: 1 << 40, Stack: fwd},
	}
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readColumn reads column i of every row group as values, nil for null.
func readColumn(t *testing.T, r *file.Reader, i int) []any {
	t.Helper()
	var out []any
	for g := 0; g < r.NumRowGroups(); g++ {
		rg := r.RowGroup(g)
		n := rg.NumRows()
		cr, err := rg.Column(i)
		if err != nil {
			t.Fatal(err)
		}
		defs := make([]int16, n)
		var vals []any
		var read int
		switch c := cr.(type) {
		case *file.Int64ColumnChunkReader:
			v := make([]int64, n)
			_, read, err = c.ReadBatch(n, v, defs, nil)
			for _, x := range v[:read] {
				vals = append(vals, x)
			}
		case *file.Int32ColumnChunkReader:
			v := make([]int32, n)
			_, read, err = c.ReadBatch(n, v, defs, nil)
			for _, x := range v[:read] {
				vals = append(vals, x)
			}
		case *file.BooleanColumnChunkReader:
			v := make([]bool, n)
			_, read, err = c.ReadBatch(n, v, defs, nil)
			for _, x := range v[:read] {
				vals = append(vals, x)
			}
		case *file.ByteArrayColumnChunkReader:
			v := make([]parquet.ByteArray, n)
			_, read, err = c.ReadBatch(n, v, defs, nil)
			for _, x := range v[:read] {
				vals = append(vals, string(x))
			}
		default:
			t.Fatalf("column %d: reader %T", i, cr)
		}
		if err != nil {
			t.Fatal(err)
		}
		required := cr.Descriptor().MaxDefinitionLevel() == 0
		for j := int64(0); j < n; j++ {
			if !required && defs[j] == 0 {
				out = append(out, nil)
				continue
			}
			out = append(out, vals[0])
			vals = vals[1:]
		}
	}
	return out
}

// The exported file has the documented schema and the trace's metadata,
// pairs each free with its alloc, and flattens stacks.
func TestWriteParquet(t *testing.T) {
	for _, group := range []int{1 << 18, 4} {
		t.Run(fmt.Sprint("group ", group), func(t *testing.T) {
			defer trace.SetParquetGroupRows(group)()
			rd, err := trace.NewReader(bytes.NewReader(parquetTrace(t)), "t")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			st, err := trace.WriteParquet(context.Background(), &out, rd)
			if err != nil {
				t.Fatal(err)
			}
			if st.Rows != 9 || st.Paired != 3 || st.RowGroups != (9+group-1)/group {
				t.Errorf("stats %+v, want 9 rows, 3 paired frees, groups of %d", st, group)
			}
			r, err := file.NewParquetReader(bytes.NewReader(out.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			sc := r.MetaData().Schema
			if sc.NumColumns() != len(parquetSchema) || len(trace.ParquetColumns) != len(parquetSchema) {
				t.Fatalf("%d columns (ParquetColumns %d), want %d", sc.NumColumns(), len(trace.ParquetColumns), len(parquetSchema))
			}
			col := map[string][]any{}
			for i, want := range parquetSchema {
				c := sc.Column(i)
				got := fmt.Sprintf("%s %s %s %v", c.Name(), c.PhysicalType(), c.LogicalType(), c.MaxDefinitionLevel() == 1)
				if w := fmt.Sprintf("%s %s %s %v", want.name, want.physical, want.logical, want.nullable); got != w || trace.ParquetColumns[i] != want.name {
					t.Errorf("column %d: %s, want %s", i, got, w)
				}
				col[c.Name()] = readColumn(t, r, i)
			}
			if kv := r.MetaData().KeyValueMetadata().FindValue(trace.MetaAllocConf); kv == nil || *kv != "expandable_segments:True" {
				t.Errorf("%s = %v in the file's metadata", trace.MetaAllocConf, kv)
			}
			const f1 = "forward\tmodel.py\t12\n<module>\ttrain.py\t3"
			for name, want := range map[string][]any{
				"seq":              {int64(0), int64(1), int64(2), int64(3), int64(4), int64(5), int64(6), int64(7), int64(8)},
				"action":           {"segment_alloc", "alloc", "alloc", "free_requested", "free_completed", "alloc", "free_requested", "free_requested", "oom"},
				"alloc_seq":        {nil, int64(1), int64(2), int64(1), int64(1), int64(5), int64(5), nil, nil},
				"stream":           {int64(0), int64(-1 << 63), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0)},
				"stack_id":         {int32(0), int32(0), nil, int32(1), int32(1), int32(2), int32(2), nil, int32(0)},
				"frame_file":       {"model.py", "model.py", nil, "adam.py", "adam.py", nil, nil, nil, "model.py"},
				"frame_line":       {int32(12), int32(12), nil, nil, nil, nil, nil, nil, int32(12)},
				"stack_text":       {f1, f1, nil, "step\tadam.py\t?", "step\tadam.py\t?", "", "", nil, f1},
				"block_size_bytes": {int64(0), int64(1024), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0)},
			} {
				if !reflect.DeepEqual(col[name], want) {
					t.Errorf("%s = %v, want %v", name, col[name], want)
				}
			}
		})
	}
}

// A cancelled export stops with the context's error.
func TestWriteParquet_cancelled(t *testing.T) {
	defer trace.SetParquetGroupRows(2)()
	rd, err := trace.NewReader(bytes.NewReader(parquetTrace(t)), "t")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := trace.WriteParquet(ctx, &bytes.Buffer{}, rd); err != context.Canceled {
		t.Errorf("err %v, want context.Canceled", err)
	}
}
