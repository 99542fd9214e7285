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
	fw, err := trace.Create(path, meta(), trace.WriterOptions{Live: true})
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

// WriteEvents writes the bytes Write writes, however the events are split
// between calls (batches filled, whole batches laid out in parallel, a tail
// left buffered) and mixed with Write, with stack ids mapped.
func TestWriteEvents(t *testing.T) {
	const batch = 100
	writeAll := func(mapped bool, parts []int, byWrite func(int) bool) []byte {
		var buf bytes.Buffer
		w := trace.NewWriter(&buf, meta(), trace.WriterOptions{BatchRows: batch})
		evs := sample(w, 1234)
		var stackMap []trace.StackID
		if mapped {
			// Ids 0..3 of the sample, rotated; events carry pre-map ids.
			stackMap = []trace.StackID{1, 2, 0}
			w.AddStack(trace.Stack{{Name: "extra", File: "x.py", Line: 1}})
		}
		lo := 0
		for k, hi := range append(parts, len(evs)) {
			if byWrite(k) {
				for i := lo; i < hi; i++ {
					ev := evs[i]
					if stackMap != nil && ev.Stack != trace.NoStack {
						ev.Stack = stackMap[ev.Stack]
					}
					if err := w.Write(&ev); err != nil {
						t.Fatal(err)
					}
				}
			} else if err := w.WriteEvents(evs[lo:hi], stackMap); err != nil {
				t.Fatal(err)
			}
			lo = hi
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, layoutPart := range []int{8 << 10, 9, 20} { // rows laid out at once, or in parts on goroutines
		restore := trace.SetLayoutPart(layoutPart)
		for _, mapped := range []bool{false, true} {
			want := writeAll(mapped, nil, func(int) bool { return true })
			for _, parts := range [][]int{nil, {0}, {1}, {99}, {100}, {150, 150, 700}, {37, 1000, 1001}, {5, 17, 333, 900, 1200}} {
				for _, mix := range []int{0, 1, 2} {
					got := writeAll(mapped, parts, func(k int) bool { return mix > 0 && k%2 == mix-1 })
					if !bytes.Equal(got, want) {
						t.Errorf("layout parts of %d, mapped %v, parts %v, mix %d: %d bytes differ from Write's %d",
							layoutPart, mapped, parts, mix, len(got), len(want))
					}
				}
			}
		}
		restore()
	}
}

// An invalid event makes WriteEvents fail with Write's error for it, in a
// buffered tail as in a batch laid out in parallel.
func TestWriteEventsInvalid(t *testing.T) {
	defer trace.SetLayoutPart(9)() // and in parts on goroutines
	for _, bad := range []int{3, 250, 1111} {
		for _, kind := range []string{"kind", "stack"} {
			w := trace.NewWriter(io.Discard, meta(), trace.WriterOptions{BatchRows: 100})
			evs := sample(w, 1234)
			ev := evs[bad]
			if kind == "kind" {
				evs[bad].Kind = 0
				ev.Kind = 0
			} else {
				evs[bad].Stack = 77
				ev.Stack = 77
			}
			ref := trace.NewWriter(io.Discard, meta(), trace.WriterOptions{BatchRows: 100})
			sample(ref, 0)
			for i := 0; i < bad; i++ {
				ref.Write(&evs[i])
			}
			want := ref.Write(&ev)
			err := w.WriteEvents(evs, nil)
			if err == nil || want == nil || err.Error() != want.Error() {
				t.Errorf("bad %s at %d: %v, want %v", kind, bad, err, want)
			}
			if err := w.Write(&evs[0]); err == nil {
				t.Errorf("bad %s at %d: the writer goes on after WriteEvents failed", kind, bad)
			}
		}
	}
}
