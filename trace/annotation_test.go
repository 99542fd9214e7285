package trace_test

import (
	"bytes"
	"encoding/json"
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

// A full PyTorch annotation ring buffer (100,000 entries, its default
// max_entries) fits in the metadata and reads back.
func TestMeta_manyAnnotations(t *testing.T) {
	m := meta()
	for i := range 100_000 {
		stage := trace.AnnotationStart
		if i%2 == 1 {
			stage = trace.AnnotationEnd
		}
		m.Annotations = append(m.Annotations, trace.Annotation{Name: "ProfilerStep#" + strings.Repeat("9", i%7), Stage: stage, TimeUs: int64(1795280309912757 + i)})
	}
	var buf bytes.Buffer
	if err := trace.NewWriter(&buf, m, trace.WriterOptions{}).Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := trace.NewReader(bytes.NewReader(buf.Bytes()), "mem")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if got := len(rd.Meta().Annotations); got != 100_000 {
		t.Errorf("%d annotations read back, want 100000", got)
	}
	t.Logf("metadata of %d bytes", buf.Len())
}

// The writer's annotations are json.Marshal's, by hand or not.
func TestEncodeAnnotations(t *testing.T) {
	as := []trace.Annotation{
		{Name: "forward", Stage: trace.AnnotationStart, Device: 0, TimeUs: 1795280309912757},
		{Name: "ProfilerStep#12", Stage: trace.AnnotationEnd, Device: -7, TimeUs: -1 << 63},
		{Name: "", Stage: "", Device: 1<<31 - 1, TimeUs: 1<<63 - 1},
	}
	for _, odd := range []string{`"`, `\\`, "<", ">", "&", "\x1f", "\x7f", "µ", "\u2028", "\xff", "a b~"} {
		as = append(as, trace.Annotation{Name: "x" + odd + "y", Stage: trace.AnnotationStart})
	}
	for i := range as {
		for _, in := range [][]trace.Annotation{nil, {}, as[:1], as[:3], as[i : i+1], as[:i+1]} {
			want, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			if got := trace.EncodeAnnotations(in); got != string(want) {
				t.Errorf("%+v: %s, want %s", in, got, want)
			}
		}
	}
}

// The fast reader of tracer.annotations reads what the writer writes as
// encoding/json does, and leaves anything else (escapes, spacing, key
// order, a device beyond int32) to it.
func TestScanAnnotations(t *testing.T) {
	as := []trace.Annotation{
		{Name: "forward", Stage: trace.AnnotationStart, Device: 0, TimeUs: 1795280309912757},
		{Name: `a "quoted" <name>\`, Stage: trace.AnnotationEnd, Device: 7, TimeUs: -3},
		{Name: "Optimizer.step#Adam.step µ", Stage: trace.AnnotationStart, Device: 1, TimeUs: 0},
	}
	for _, in := range [][]trace.Annotation{as[:1], {as[0], as[2]}, as} {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var want []trace.Annotation
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := trace.ScanAnnotations(string(b))
		escaped := bytes.ContainsRune(b, '\\')
		if ok == escaped {
			t.Errorf("%s: ok = %v, want %v", b, ok, !escaped)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read %+v, want %+v", b, got, want)
		}
	}
	for _, s := range []string{`[]`, `[ ]`, `[{"stage":"END","name":"x","device":0,"time_us":1}]`,
		`[{"name":"x","stage":"END","device":4294967296,"time_us":1}]`, `[{"name":"x","stage":"END","device":0,"time_us":1}]x`,
		`[{"name":"x","stage":"END","device":0,"time_us":1.5}]`} {
		got, ok := trace.ScanAnnotations(s)
		if s == `[]` {
			if !ok || len(got) != 0 {
				t.Errorf("%s: %v, %v; want empty, true", s, got, ok)
			}
			continue
		}
		if ok {
			t.Errorf("%s: read %+v, want it left to encoding/json", s, got)
		}
	}
}
