package trace_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestStacksScale: traces whose stacks are most of their bytes (16k
// distinct stacks of depth 16 drawn from a few hundred frames; 1,000 of
// depth 512) round-trip with every event and every stack, through Create
// and Open as an import writes and a command reads them, and take little
// more than the frames' text: each frame is stored once.
func TestStacksScale(t *testing.T) {
	for _, c := range []struct {
		name          string
		stacks, depth int
		frames        int // distinct frames the stacks draw from
		batch         int
	}{
		{"16k_depth16", 16 << 10, 16, 512, 0},
		{"1k_depth512", 1000, 512, 4096, 0},
		{"16k_depth16_small_batches", 16 << 10, 16, 512, 1000}, // a delta per batch, as a recording writes them
	} {
		t.Run(c.name, func(t *testing.T) {
			frames := make([]trace.Frame, c.frames)
			text := 0
			for i := range frames {
				frames[i] = trace.Frame{Name: fmt.Sprintf("layer_%d.forward", i),
					File: fmt.Sprintf("/opt/venv/lib/python3.11/site-packages/model/part%d.py", i%37), Line: int32(i*7 + 1)}
				text += len(frames[i].Name) + len(frames[i].File) + 8
			}
			path := filepath.Join(t.TempDir(), "t.arrows")
			w, err := trace.Create(path, meta(), trace.WriterOptions{BatchRows: c.batch})
			if err != nil {
				t.Fatal(err)
			}
			var want []trace.Stack
			var evs []trace.Event
			for i := range c.stacks {
				st := make(trace.Stack, c.depth)
				for j := range st {
					// Distinct for each i: frame j of stack i, mixed.
					st[j] = frames[(i*31+j*j*17+i/c.frames*j)%c.frames]
				}
				st[0] = frames[i%c.frames]
				st[c.depth-1] = frames[(i/c.frames)%c.frames]
				id := w.AddStack(st)
				if int(id) != len(want) {
					t.Fatalf("stack %d: id %d: not distinct", i, id)
				}
				want = append(want, st)
				ev := trace.Event{Kind: trace.KindAlloc, Addr: uint64(i) << 9, Size: 512, Stack: id}
				if err := w.Write(&ev); err != nil {
					t.Fatal(err)
				}
				ev.Seq = int64(i)
				evs = append(evs, ev)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			rd, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			var got []trace.Event
			for rd.Next() {
				got = append(got, *rd.Event())
			}
			if err := rd.Err(); err != nil || rd.Truncated() {
				t.Fatalf("read %d events of %d: %v (cut short: %v)", len(got), len(evs), err, rd.Truncated())
			}
			if !reflect.DeepEqual(got, evs) {
				t.Fatalf("read %d events, want %d, or they differ", len(got), len(evs))
			}
			if !reflect.DeepEqual(rd.Stacks(), want) {
				t.Fatalf("read %d stacks, want %d, or they differ", len(rd.Stacks()), len(want))
			}
			// The frames' text once, 4 bytes a frame reference and the
			// events' columns: within a small factor of the text alone.
			refs := c.stacks * c.depth * 4
			rows := c.stacks * 100
			if limit := 2 * (text + refs + rows); st.Size() > int64(limit) {
				t.Errorf("trace is %d bytes; the frames' text %d, their references %d: want at most %d",
					st.Size(), text, refs, limit)
			}
			t.Logf("%d bytes: frames' text %d, references %d", st.Size(), text, refs)
		})
	}
}

// TestReader_versions: this reader reads every format version, and the
// same import in each gives the same events and stacks. testdata/v<N>.arrows
// is tracer import of testdata/snapshots/oom__default__seed1.pickle by the
// tracer that wrote version N.
func TestReader_versions(t *testing.T) {
	type read struct {
		meta   trace.Meta
		evs    []trace.Event
		stacks []trace.Stack
	}
	var all []read
	for v := trace.V1; v <= trace.Current; v++ {
		rd, err := trace.Open(fmt.Sprintf("testdata/v%d.arrows", v))
		if err != nil {
			t.Fatal(err)
		}
		var r read
		for rd.Next() {
			r.evs = append(r.evs, *rd.Event())
		}
		if err := rd.Err(); err != nil || rd.Truncated() {
			t.Fatalf("v%d: %v (cut short: %v)", v, err, rd.Truncated())
		}
		r.meta, r.stacks = rd.Meta(), rd.Stacks()
		rd.Close()
		if r.meta.Version != v {
			t.Errorf("testdata/v%d.arrows is version %d", v, r.meta.Version)
		}
		if len(r.evs) == 0 || len(r.stacks) == 0 {
			t.Fatalf("v%d: %d events, %d stacks", v, len(r.evs), len(r.stacks))
		}
		all = append(all, r)
	}
	for i, r := range all[1:] {
		if !reflect.DeepEqual(r.evs, all[0].evs) || !reflect.DeepEqual(r.stacks, all[0].stacks) {
			t.Errorf("v%d: %d events, %d stacks, or they differ from v1's (%d, %d)",
				i+2, len(r.evs), len(r.stacks), len(all[0].evs), len(all[0].stacks))
		}
	}
}

// The stack table's frame text (appendFrame) is FormatFrame's.
func TestAppendFrame(t *testing.T) {
	for _, f := range []trace.Frame{
		{}, {Name: "forward", File: "model.py", Line: 12}, {Name: "a\tb\nc", File: "\n", Line: trace.UnknownLine},
		{Name: "x", File: "y.py", Line: 1<<31 - 1}, {Name: "é", File: "\t", Line: -5},
	} {
		if got, want := string(trace.AppendFrame([]byte("prefix"), f)), "prefix"+trace.FormatFrame(f); got != want {
			t.Errorf("%+v: %q, want %q", f, got, want)
		}
	}
}
