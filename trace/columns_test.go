package trace_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// columnsOf lays evs out as Columns (their Device and Flags left out).
func columnsOf(evs []trace.Event, device int32) *trace.Columns {
	c := &trace.Columns{N: len(evs), Device: device}
	for _, ev := range evs {
		c.TimeUs = append(c.TimeUs, ev.TimeUs)
		c.Kind = append(c.Kind, ev.Kind)
		c.Addr = append(c.Addr, ev.Addr)
		c.Size = append(c.Size, ev.Size)
		c.Stream = append(c.Stream, ev.Stream)
		c.PoolA = append(c.PoolA, ev.Pool.A)
		c.PoolB = append(c.PoolB, ev.Pool.B)
		c.Stack = append(c.Stack, ev.Stack)
		c.BlockSize = append(c.BlockSize, ev.BlockSize)
		c.DeviceUsed = append(c.DeviceUsed, ev.DeviceUsed)
	}
	return c
}

// WriteColumns writes the same events as Write, each call one batch of its
// own after what Write buffered, with seq continuing.
func TestWriteColumns(t *testing.T) {
	var buf bytes.Buffer
	w := trace.NewWriter(&buf, meta(), trace.WriterOptions{BatchRows: 100})
	evs := sample(w, 1000)
	var want []trace.Event
	for i := range evs {
		evs[i].Flags = 0
		evs[i].Device = 3
	}
	// 10 by Write (buffered), then 250 as columns, 0, then 7 by Write, then 733.
	for i := 0; i < 10; i++ {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, part := range [][2]int{{10, 260}, {260, 260}} {
		if err := w.WriteColumns(columnsOf(evs[part[0]:part[1]], 3)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 260; i < 267; i++ {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	c := columnsOf(evs[267:], 3)
	c.TimeUs = append(c.TimeUs, 0, 0) // longer columns: the first N rows count
	if err := w.WriteColumns(c); err != nil {
		t.Fatal(err)
	}
	if w.Events() != 1000 {
		t.Errorf("Events() = %d", w.Events())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want = evs
	rd, err := trace.NewReader(bytes.NewReader(buf.Bytes()), "cols")
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for rd.Next() {
		got := *rd.Event()
		w := want[i]
		w.Seq = int64(i)
		if got != w {
			t.Fatalf("event %d: got %+v, want %+v", i, got, w)
		}
		i++
	}
	if err := rd.Err(); err != nil || i != len(want) || rd.Truncated() {
		t.Fatalf("read %d of %d events, err %v, truncated %v", i, len(want), err, rd.Truncated())
	}
}

func TestWriteColumnsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *trace.Columns)
		want string
	}{
		{"kind", func(c *trace.Columns) { c.Kind[1] = 0 }, "write event 1: invalid kind"},
		{"stack", func(c *trace.Columns) { c.Stack[2] = 99 }, "write event 2: stack id 99 was not added"},
		{"short", func(c *trace.Columns) { c.Addr = c.Addr[:2] }, "fewer than 3 rows"},
	} {
		w := trace.NewWriter(&bytes.Buffer{}, meta(), trace.WriterOptions{})
		c := columnsOf(sample(w, 3), 0)
		tc.edit(c)
		if err := w.WriteColumns(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// BenchmarkWriteColumns writes batches of 64K events laid out as columns:
// the writer's cost per event when no Write call per event is made.
func BenchmarkWriteColumns(b *testing.B) {
	w := trace.NewWriter(io.Discard, meta(), trace.WriterOptions{})
	c := columnsOf(sample(w, trace.DefaultBatchRows), 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.WriteColumns(c); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.N), "ns/event")
}

// A trace written in place (a live recording: through the writer's
// goroutine, each batch handed over as it ends) holds the same bytes as one
// written to an io.Writer.
func TestWriteColumnsInPlaceSameBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.arrows")
	var buf bytes.Buffer
	fw, err := trace.Create(path, meta(), trace.WriterOptions{InPlace: true})
	if err != nil {
		t.Fatal(err)
	}
	bw := trace.NewWriter(&buf, meta(), trace.WriterOptions{})
	for _, w := range []*trace.Writer{fw, bw} {
		evs := sample(w, 30000)
		for i := range evs {
			evs[i].Flags, evs[i].Device = 0, 1
		}
		for k := 0; k < len(evs); k += 7000 { // batches across the writer's 1 MiB blocks
			if err := w.WriteColumns(columnsOf(evs[k:min(k+7000, len(evs))], 1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, buf.Bytes()) {
		t.Fatalf("in place: %d bytes (%v), want the %d bytes written to a buffer", len(got), err, buf.Len())
	}
}
