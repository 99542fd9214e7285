package trace_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// A StreamWriter writes the bytes a Writer from Create writes for the same
// events, whatever the number of batches, their null counts and the calls'
// sizes, the events' memory reused once WriteEventsThen has copied them.
// streamStacks are the stacks the StreamWriter tests add: one of two
// frames, one of one, and one whose frame holds a tab and a newline.
var streamStacks = []trace.Stack{
	{{Name: "forward", File: "model.py", Line: 12}, {Name: "<module>", File: "train.py", Line: 3}},
	{{Name: "step", File: "adam.py", Line: 90}},
	{{Name: "odd\tname", File: "we\nird.py", Line: 7}},
}

func TestStreamWriter(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 7, 4097, trace.DefaultBatchRows, trace.DefaultBatchRows + 1, 2*trace.DefaultBatchRows + 4100} {
		for _, noStacks := range []int{0, 1, 2} { // none, some, all without a stack
			want := filepath.Join(dir, "want.arrows")
			w, err := trace.Create(want, meta(), trace.WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			evs := sample(w, n)
			for i := range evs {
				switch {
				case noStacks == 0 && evs[i].Stack == trace.NoStack:
					evs[i].Stack = 0
				case noStacks == 2:
					evs[i].Stack = trace.NoStack
				}
			}
			if err := w.WriteEvents(evs, nil); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			nulls := make([]int, (n+trace.DefaultBatchRows-1)/trace.DefaultBatchRows)
			for i, ev := range evs {
				if ev.Stack == trace.NoStack {
					nulls[i/trace.DefaultBatchRows]++
				}
			}
			got := filepath.Join(dir, "got.arrows")
			sw, err := trace.CreateStream(got, meta(), int64(n), nulls)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range streamStacks {
				sw.AddStack(st)
			}
			// Through WriteEventsThen, whose copied clears the events
			// it was handed: once copied they are the caller's again.
			var buf []trace.Event
			for lo := 0; lo < n; {
				hi := min(n, lo+1+lo%5000)
				buf = append(buf[:0], evs[lo:hi]...)
				calls := 0
				if err := sw.WriteEventsThen(buf, nil, func() { calls++; clear(buf) }); err != nil {
					t.Fatal(err)
				}
				if calls != 1 {
					t.Fatalf("events %d-%d: copied called %d times, want 1", lo, hi, calls)
				}
				lo = hi
			}
			if err := sw.Close(); err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(want)
			b, _ := os.ReadFile(got)
			if !bytes.Equal(a, b) {
				t.Errorf("%d events, noStacks %d: %d bytes differ from Create's %d", n, noStacks, len(b), len(a))
			}
		}
	}
}

// A StreamWriter maps stack ids through a stack map as a Writer does, with
// the same bytes written, and refuses an event whose id is not in the map
// or maps to no stack added, or whose kind is invalid, with Write's error.
func TestStreamWriterMapped(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.arrows")
	const n = 5000
	stackMap := []trace.StackID{1, 2, 0, 77} // 77: no such stack
	extra := trace.Stack{{Name: "extra", File: "x.py", Line: 1}}
	// Through a Writer: sample's stacks, then extra.
	create := func(evs []trace.Event) ([]byte, error) {
		w, err := trace.Create(out, meta(), trace.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sample(w, 0)
		w.AddStack(extra)
		if err := w.WriteEvents(evs, stackMap); err != nil {
			w.Abort()
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return os.ReadFile(out)
	}
	// Through a StreamWriter, the same stacks, the events in calls of
	// uneven sizes.
	stream := func(evs []trace.Event) ([]byte, error) {
		nulls := []int{0}
		for _, ev := range evs {
			if ev.Stack == trace.NoStack {
				nulls[0]++
			}
		}
		sw, err := trace.CreateStream(out, meta(), n, nulls)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range append(streamStacks[:len(streamStacks):len(streamStacks)], extra) {
			sw.AddStack(st)
		}
		for lo := 0; lo < n; {
			hi := min(n, lo+1+lo%300)
			if err := sw.WriteEvents(evs[lo:hi], stackMap); err != nil {
				sw.Abort()
				return nil, err
			}
			lo = hi
		}
		if err := sw.Close(); err != nil {
			return nil, err
		}
		return os.ReadFile(out)
	}
	w := trace.NewWriter(io.Discard, meta(), trace.WriterOptions{})
	evs := sample(w, n)
	want, err := create(evs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := stream(evs)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%d bytes (%v), want Create's %d", len(got), err, len(want))
	}
	for _, bad := range []int{0, 63, 64, 2100, n - 1} {
		for _, how := range []string{"kind", "unmapped", "no stack"} {
			ev := evs[bad]
			switch how {
			case "kind":
				evs[bad].Kind = 0
			case "unmapped":
				evs[bad].Stack = 4
			case "no stack":
				evs[bad].Stack = 3
			}
			_, want := create(evs)
			_, err := stream(evs)
			if err == nil || want == nil || err.Error() != want.Error() {
				t.Errorf("bad %s at %d: %v, want %v", how, bad, err, want)
			}
			evs[bad] = ev
		}
	}
}

// A StreamWriter refuses more or fewer events, or other null counts, than
// announced, and leaves nothing behind then.
func TestStreamWriterMismatch(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.arrows")
	evs := []trace.Event{{Kind: trace.KindAlloc, Stack: trace.NoStack}, {Kind: trace.KindAlloc, Stack: trace.NoStack}}
	for _, tc := range []struct {
		total int64
		nulls []int
	}{{1, []int{1}}, {3, []int{2}}, {2, []int{1}}} {
		sw, err := trace.CreateStream(out, meta(), tc.total, tc.nulls)
		if err != nil {
			t.Fatal(err)
		}
		err = sw.WriteEvents(evs, nil)
		if err == nil {
			err = sw.Close()
		} else {
			sw.Abort()
		}
		if err == nil {
			t.Errorf("total %d, nulls %v: no error", tc.total, tc.nulls)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("total %d, nulls %v: left %v", tc.total, tc.nulls, ents)
		}
	}
}

// A write that fails in the StreamWriter's piece writer (here: its file
// closed under it) comes back from WriteEvents or Close, without a hang,
// and nothing is left at the destination.
func TestStreamWriterWriteError(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.arrows")
	const n = 5 * 2048
	evs := make([]trace.Event, n)
	for i := range evs {
		evs[i] = trace.Event{Kind: trace.KindAlloc, Addr: uint64(i) << 9, Size: 512, Stack: trace.NoStack}
	}
	for _, breakAt := range []int{0, 2048, 3 * 2048, n} {
		sw, err := trace.CreateStream(out, meta(), n, []int{n})
		if err != nil {
			t.Fatal(err)
		}
		if err := sw.WriteEvents(evs[:breakAt], nil); err != nil {
			t.Fatalf("break at %d: before the break: %v", breakAt, err)
		}
		trace.BreakStreamFile(sw)
		err = sw.WriteEvents(evs[breakAt:], nil)
		if cerr := sw.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			t.Errorf("break at %d: no error", breakAt)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("break at %d: left %v", breakAt, ents)
		}
	}
}

// BenchmarkStreamWriter writes a trace as the import of a small snapshot
// does: the null counts announced, the stacks added, then the events in
// chunks of 1024 through WriteEventsThen. The events are those of the
// trace at $TRACER_BENCH_TRACE, or of the embedded sample.
func BenchmarkStreamWriter(b *testing.B) {
	var rd *trace.Reader
	var err error
	if path := os.Getenv("TRACER_BENCH_TRACE"); path != "" {
		rd, err = trace.Open(path)
	} else {
		rd, err = trace.NewReader(bytes.NewReader(sampleTrace(b)), "sample")
	}
	if err != nil {
		b.Fatal(err)
	}
	var evs []trace.Event
	for rd.Next() {
		evs = append(evs, *rd.Event())
	}
	stacks, m := rd.Stacks(), rd.Meta()
	rd.Close()
	nulls := make([]int, (len(evs)+trace.DefaultBatchRows-1)/trace.DefaultBatchRows)
	for i, ev := range evs {
		if ev.Stack == trace.NoStack {
			nulls[i/trace.DefaultBatchRows]++
		}
	}
	out := filepath.Join(b.TempDir(), "out.arrows")
	b.SetBytes(int64(len(evs)))
	b.ReportAllocs()
	for b.Loop() {
		sw, err := trace.CreateStream(out, m, int64(len(evs)), nulls)
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range stacks {
			sw.AddStack(st)
		}
		for lo := 0; lo < len(evs); lo += 1024 {
			if err := sw.WriteEventsThen(evs[lo:min(len(evs), lo+1024)], nil, func() {}); err != nil {
				b.Fatal(err)
			}
		}
		if err := sw.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
