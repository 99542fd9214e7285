package trace_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/tracer-dev/tracer/trace"
)

// Annotations survive a write and a read, in time order, and a trace
// without them has no tracer.annotations key at all.
func TestMeta_annotations(t *testing.T) {
	m := meta()
	m.Annotations = []trace.Annotation{
		{Name: "forward", Stage: trace.AnnotationStart, Device: 0, TimeUs: 10},
		{Name: "forward", Stage: trace.AnnotationEnd, Device: 0, TimeUs: 20},
		{Name: "Optimizer.step#Adam.step", Stage: trace.AnnotationStart, Device: 1, TimeUs: 30},
	}
	for _, tc := range []struct {
		name string
		in   []trace.Annotation
		key  bool
	}{{"some", m.Annotations, true}, {"none", nil, false}} {
		m.Annotations = tc.in
		var buf bytes.Buffer
		w := trace.NewWriter(&buf, m, trace.WriterOptions{})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(buf.Bytes(), []byte(trace.MetaAnnotations)); got != tc.key {
			t.Errorf("%s: key written = %v, want %v", tc.name, got, tc.key)
		}
		rd, err := trace.NewReader(bytes.NewReader(buf.Bytes()), "mem")
		if err != nil {
			t.Fatal(err)
		}
		if got := rd.Meta().Annotations; !reflect.DeepEqual(got, tc.in) {
			t.Errorf("%s: annotations = %+v, want %+v", tc.name, got, tc.in)
		}
		rd.Close()
	}
}

// foreignMeta is an empty trace whose schema carries md besides the format keys.
func foreignMeta(t *testing.T, key, value string) []byte {
	md := arrow.NewMetadata([]string{trace.MetaFormat, trace.MetaVersion, key}, []string{trace.FormatName, "2", value})
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: trace.ColAction, Type: dt},
		{Name: trace.ColAddr, Type: arrow.PrimitiveTypes.Uint64},
		{Name: trace.ColSizeBytes, Type: arrow.PrimitiveTypes.Int64},
	}, &md)
	mem := memory.NewGoAllocator()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	rec := b.NewRecord()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.Bytes()
}

// Another producer's annotations are sorted by time; malformed ones are
// refused with a line naming the key.
func TestMeta_foreignAnnotations(t *testing.T) {
	data := foreignMeta(t, trace.MetaAnnotations,
		`[{"name":"b","stage":"START","device":0,"time_us":5},{"name":"a","stage":"END","device":0,"time_us":3}]`)
	rd, err := trace.NewReader(bytes.NewReader(data), "foreign")
	if err != nil {
		t.Fatal(err)
	}
	if got := rd.Meta().Annotations; len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Errorf("annotations = %+v, want a then b", got)
	}
	rd.Close()
	for _, bad := range []string{`{"name":"x"}`, `[{"name":"x","stage":"BEGIN"}]`} {
		_, err := trace.NewReader(bytes.NewReader(foreignMeta(t, trace.MetaAnnotations, bad)), "foreign")
		if err == nil || !strings.Contains(err.Error(), trace.MetaAnnotations) || !strings.Contains(err.Error(), "foreign") {
			t.Errorf("annotations %s: err = %v, want one naming the file and %s", bad, err, trace.MetaAnnotations)
		}
	}
}
