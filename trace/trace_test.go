package trace_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/tracer-dev/tracer/trace"
)

// sample builds n deterministic events with a few shared stacks.
func sample(w *trace.Writer, n int) []trace.Event {
	rng := rand.New(rand.NewSource(1))
	stacks := []trace.StackID{
		trace.NoStack,
		w.AddStack(trace.Stack{{Name: "forward", File: "model.py", Line: 12}, {Name: "<module>", File: "train.py", Line: 3}}),
		w.AddStack(trace.Stack{{Name: "step", File: "adam.py", Line: 90}}),
		w.AddStack(trace.Stack{{Name: "odd\tname", File: "we\nird.py", Line: 7}}),
	}
	evs := make([]trace.Event, n)
	kinds := trace.Kinds()
	for i := range evs {
		evs[i] = trace.Event{
			TimeUs:     1_700_000_000_000_000 + int64(i)*3,
			Device:     int32(rng.Intn(2)),
			Kind:       kinds[rng.Intn(len(kinds))],
			Addr:       0x7f00_0000_0000 + uint64(rng.Intn(1<<20))*512,
			Size:       int64(rng.Intn(1 << 30)),
			Stream:     uint64(rng.Intn(3)) * 0x1234567,
			Pool:       trace.PoolID{A: uint64(rng.Intn(2)), B: 0},
			Stack:      stacks[rng.Intn(len(stacks))],
			Flags:      trace.Flags(rng.Intn(4)),
			BlockSize:  int64(rng.Intn(1<<20)) * 512,
			DeviceUsed: int64(rng.Intn(1 << 30)),
		}
	}
	return evs
}

func meta() trace.Meta {
	return trace.Meta{
		Producer: "tracer test", Source: trace.SourceSnapshot, SourceFile: "x.pickle",
		AllocConf: "expandable_segments:True", AllocSettings: `{"expandable_segments":true}`,
		DeviceName: "NVIDIA H100 80GB HBM3", DeviceTotal: 85017493504, MemoryFraction: 0.03,
		MemoryLimit: 2550524805, Truncated: true, Extra: map[string]string{"workload": "mlp"},
	}
}

func writeTrace(t testing.TB, mem memory.Allocator, n, batch int) ([]byte, []trace.Event, *trace.Writer) {
	var buf bytes.Buffer
	w := trace.NewWriter(&buf, meta(), trace.WriterOptions{BatchRows: batch, Mem: mem})
	evs := sample(w, n)
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
		evs[i].Seq = int64(i)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), evs, w
}

func TestRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data, want, _ := writeTrace(t, mem, 5000, 777)
	rd, err := trace.NewReader(bytes.NewReader(data), "mem")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	gotMeta := rd.Meta()
	wantMeta := meta()
	wantMeta.Version = trace.Current
	if !reflect.DeepEqual(gotMeta, wantMeta) {
		t.Errorf("meta = %+v\nwant %+v", gotMeta, wantMeta)
	}
	i := 0
	for rd.Next() {
		got := *rd.Event()
		if i >= len(want) {
			t.Fatalf("more events than written")
		}
		if got != want[i] {
			t.Fatalf("event %d = %+v\nwant %+v", i, got, want[i])
		}
		if got.Stack != trace.NoStack && len(rd.Stack(got.Stack)) == 0 {
			t.Fatalf("event %d: stack %d unknown", i, got.Stack)
		}
		i++
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(want) {
		t.Fatalf("read %d events, wrote %d", i, len(want))
	}
	if rd.Truncated() {
		t.Error("a closed trace reads as truncated")
	}
	if s := rd.Stack(1); len(s) != 1 || s[0] != (trace.Frame{Name: "step", File: "adam.py", Line: 90}) {
		t.Errorf("stack 1 = %v", s)
	}
	if s := rd.Stack(2); len(s) != 1 || s[0].Name != "odd name" || s[0].File != "we ird.py" {
		t.Errorf("tabs and newlines not cleaned: %q", s)
	}
}

// TestNextTo: NextTo decodes every field of each event into the one it is
// given, whatever that held (Ref set to 0), and leaves Event's alone.
func TestNextTo(t *testing.T) {
	data, want, _ := writeTrace(t, memory.NewGoAllocator(), 3000, 512)
	rd, err := trace.NewReader(bytes.NewReader(data), "mem")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	before := *rd.Event()
	var got []trace.Event
	for {
		ev := trace.Event{Seq: -1, TimeUs: -1, Device: -1, Kind: trace.KindOOM, Addr: 1, Size: -1, Stream: 1,
			Pool: trace.PoolID{A: 9, B: 9}, Stack: 99, Flags: 0xff, BlockSize: -1, DeviceUsed: -1, Ref: 7}
		if !rd.NextTo(&ev) {
			break
		}
		got = append(got, ev)
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("NextTo read %d events, not the %d written", len(got), len(want))
	}
	if *rd.Event() != before {
		t.Errorf("NextTo changed Event: %+v", *rd.Event())
	}
}

func TestStacksStoredOnce(t *testing.T) {
	st := trace.Stack{{Name: strings.Repeat("deep_frame_name", 40), File: "f.py", Line: 1}}
	size := func(withStack bool) int {
		var buf bytes.Buffer
		w := trace.NewWriter(&buf, meta(), trace.WriterOptions{BatchRows: 10})
		id := trace.NoStack
		if withStack {
			id = w.AddStack(st)
			if id2 := w.AddStack(append(trace.Stack(nil), st...)); id2 != id {
				t.Fatalf("identical stacks got ids %d and %d", id, id2)
			}
		}
		for i := 0; i < 1000; i++ {
			if err := w.Write(&trace.Event{Kind: trace.KindAlloc, Stack: id, Size: 512}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Len()
	}
	// 100 batches share one 600-byte stack: written once as a dictionary, it
	// costs one copy plus the per-batch index buffers, not 100 copies.
	if with, without := size(true), size(false); with-without > 2*len(trace.FormatStack(st))+100*64 {
		t.Errorf("the stack costs %d bytes over 100 batches: the dictionary is repeated", with-without)
	}
}

func TestCreateIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.arrows")
	w, err := trace.Create(path, meta(), trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&trace.Event{Kind: trace.KindAlloc, Stack: trace.NoStack}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("destination exists before Close: %v", err)
	}
	w.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("Abort left %d files behind", len(ents))
	}
	w, _ = trace.Create(path, meta(), trace.WriterOptions{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if rd.Next() || rd.Err() != nil || rd.Truncated() {
		t.Fatalf("empty trace: next=%v err=%v truncated=%v", rd.Next(), rd.Err(), rd.Truncated())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("want only the trace in %s, have %d files", dir, len(ents))
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 like any output", st.Mode().Perm())
	}
	// Several MB, so the output crosses the asynchronous writer's blocks.
	data, want, _ := writeTrace(t, memory.DefaultAllocator, 100000, 4096)
	w, _ = trace.Create(path, meta(), trace.WriterOptions{BatchRows: 4096})
	want = sample(w, len(want)) // the same events, with their stacks added to w
	for i := range want {
		if err := w.Write(&want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); len(data) < 1<<20 || !bytes.Equal(got, data) {
		t.Errorf("Create wrote %d bytes, NewWriter %d: they differ", len(got), len(data))
	}
}

// A recording killed mid-run: the file ends inside or after a batch, with
// no end-of-stream marker. Every whole batch must still read.
func TestReader_truncated(t *testing.T) {
	data, want, _ := writeTrace(t, memory.DefaultAllocator, 1000, 100)
	for _, cut := range []int{len(data) - 8, len(data) - 100, len(data) / 2, len(data) / 3} {
		rd, err := trace.NewReader(bytes.NewReader(data[:cut]), "cut")
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		n := 0
		for rd.Next() {
			if *rd.Event() != want[n] {
				t.Fatalf("cut at %d: event %d differs", cut, n)
			}
			n++
		}
		if err := rd.Err(); err != nil {
			t.Errorf("cut at %d: %v", cut, err)
		}
		if !rd.Truncated() {
			t.Errorf("cut at %d: not reported truncated", cut)
		}
		if n%100 != 0 || n == 0 && cut > len(data)/2 {
			t.Errorf("cut at %d: read %d events, want whole batches", cut, n)
		}
		rd.Close()
	}
}

// A file cut inside a batch body of several MB: the bounded allocator
// refuses the body (longer than the rest of the file), and that must read as
// a cut, not as corruption.
func TestOpen_truncatedInsideLargeBatch(t *testing.T) {
	data, want, _ := writeTrace(t, memory.DefaultAllocator, 200000, 65536)
	cut := len(data) * 4 / 10 // inside the second of four batches
	path := filepath.Join(t.TempDir(), "cut.arrows")
	if err := os.WriteFile(path, data[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	rd, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n := 0
	for rd.Next() {
		if *rd.Event() != want[n] {
			t.Fatalf("event %d differs", n)
		}
		n++
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("a cut trace reads as an error: %v", err)
	}
	if !rd.Truncated() || n != 65536 {
		t.Fatalf("read %d events (want the first batch, 65536), truncated %v", n, rd.Truncated())
	}
}

func TestOpen_badInput(t *testing.T) {
	dir := t.TempDir()
	data, _, _ := writeTrace(t, memory.DefaultAllocator, 10, 10)
	files := map[string][]byte{
		"empty.arrows":     {},
		"text.arrows":      []byte("hello, this is not arrow at all\n"),
		"schemacut.arrows": data[:40],
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"empty.arrows", "text.arrows", "schemacut.arrows", "missing.arrows", "."} {
		path := filepath.Join(dir, name)
		_, err := trace.Open(path)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, path) && !strings.Contains(msg, filepath.Base(path)) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q should be one line naming the file", name, msg)
		}
		// What was wrong, told apart: not a trace at all, or a trace cut short.
		say := map[string]string{"text.arrows": "not an Arrow IPC stream", "schemacut.arrows": "truncated"}[name]
		if !strings.Contains(err.Error(), say) {
			t.Errorf("%s: error %q should say %q", name, err, say)
		}
	}
}

func TestReader_newerVersion(t *testing.T) {
	restore := trace.SetWriteVersion(9)
	data, _, _ := writeTrace(t, memory.DefaultAllocator, 3, 10)
	restore()
	_, err := trace.NewReader(bytes.NewReader(data), "new.arrows")
	var ve *trace.VersionError
	if !errors.As(err, &ve) || ve.Got != 9 {
		t.Fatalf("err = %v, want a VersionError for v9", err)
	}
	if !strings.Contains(err.Error(), "upgrade tracer") || !strings.Contains(err.Error(), "new.arrows") {
		t.Errorf("message %q does not name the file and say what to do", err)
	}
}

func TestKinds(t *testing.T) {
	for _, k := range trace.Kinds() {
		got, ok := trace.ParseKind(k.String())
		if !ok || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, ok)
		}
	}
	if _, ok := trace.ParseKind("user_annotation"); ok {
		t.Error("unknown action accepted")
	}
}

func FuzzReader(f *testing.F) {
	data, _, _ := writeTrace(f, memory.DefaultAllocator, 50, 16)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte{})
	m := meta()
	m.Annotations = []trace.Annotation{{Name: "forward", Stage: trace.AnnotationStart, TimeUs: 1}, {Name: "forward", Stage: trace.AnnotationEnd, TimeUs: 2}}
	var withAnn bytes.Buffer
	if err := trace.NewWriter(&withAnn, m, trace.WriterOptions{}).Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(withAnn.Bytes())
	for v := trace.V1; v <= trace.Current; v++ {
		old, err := os.ReadFile(fmt.Sprintf("testdata/v%d.arrows", v))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(old)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rd, err := trace.NewReader(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		for rd.Next() {
			ev := rd.Event()
			_ = rd.Stack(ev.Stack)
		}
		rd.Close()
	})
}

// BenchmarkReader reads a trace of real events: the embedded sample's
// mlp_train run (imported from a PyTorch snapshot) repeated to 1M events.
func BenchmarkReader(b *testing.B) {
	src, err := trace.NewReader(bytes.NewReader(sampleTrace(b)), "sample")
	if err != nil {
		b.Fatal(err)
	}
	var evs []trace.Event
	for src.Next() {
		evs = append(evs, *src.Event())
	}
	var buf bytes.Buffer
	w := trace.NewWriter(&buf, src.Meta(), trace.WriterOptions{})
	for id := trace.StackID(0); src.Stack(id) != nil; id++ {
		w.AddStack(src.Stack(id))
	}
	const n = 1 << 20
	for i := 0; i < n; i++ {
		if err := w.Write(&evs[i%len(evs)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rd, err := trace.NewReader(bytes.NewReader(data), "bench")
		if err != nil {
			b.Fatal(err)
		}
		k := 0
		for rd.Next() {
			k++
		}
		if k != n || rd.Err() != nil {
			b.Fatalf("read %d events: %v", k, rd.Err())
		}
		rd.Close()
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
}

// sampleTrace is the trace tracer embeds (record/sample), read from disk:
// package trace cannot import its own users.
func sampleTrace(tb testing.TB) []byte {
	data, err := os.ReadFile("../record/sample/mlp_train.arrows")
	if err != nil {
		tb.Skip("no sample trace:", err)
	}
	return data
}

// BenchmarkWriter measures the steady-state cost of Write: one long trace,
// batches flushed as they fill, as in a live recording.
func BenchmarkWriter(b *testing.B) {
	w := trace.NewWriter(io.Discard, meta(), trace.WriterOptions{})
	evs := sample(w, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.Write(&evs[i&(1<<16-1)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
