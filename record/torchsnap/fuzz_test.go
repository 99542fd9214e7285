package torchsnap

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// FuzzDecode: the decoder must not panic or allocate without bound on any
// input; errors are fine. A successful decode must also survive
// reconstruction and validation, and undo must find a lost alloc as the
// forward walk does, and decoding into a spill (Open) must give what
// decoding in memory gives (checkSpilled). Seeds: testdata/fuzz/FuzzDecode (made by
// testdata/make_fuzz_corpus.py: a tiny snapshot in every form) and one
// small real bare-list dump. Larger seeds (30 KB+) make the fuzzer spend its
// time minimizing instead of exploring.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{"testdata/segments_only.pickle"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, d := range s.Devices {
			for _, e := range d.Events {
				if e.Stack != -1 && (e.Stack < 0 || int(e.Stack) >= len(s.Stacks)) {
					t.Fatalf("event stack %d out of range (%d stacks)", e.Stack, len(s.Stacks))
				}
			}
			if got, want := newStartState(d).undo(d.Events), lostAllocRef(d.Events); got != want {
				t.Fatalf("undo reports a lost alloc %v, the forward walk %v", got, want)
			}
			if _, err := d.Reconstruct(roundSize); err != nil {
				t.Fatal(err)
			}
			d.Validate()
		}
		checkSpilled(t, data, s)
	})
}

// checkSpilled decodes data again into a spill, as OpenFollowed does (its
// tables outside the heap, unmapped before the comparison: a snapshot that
// still referred to them would fault or differ), and checks that it gives
// what mem, the in-memory decode of data, gave: the events read back
// through Chunk, the reconstructed start (from a Forward that followed the
// spill, where it covers the device, its tables outside the heap too) and
// the problems.
func checkSpilled(t *testing.T, data []byte, mem *Snapshot) {
	var fw Forward
	tables := new(grow.OffHeap)
	defer tables.Release()
	fw.TablesIn(tables)
	off := new(grow.OffHeap)
	sp, err := newSpillOff("", fw.Add, int64(len(data)), off)
	if err != nil {
		t.Fatal(err)
	}
	s, err := decodeWith(bytes.NewReader(data), int64(len(data)), sp, off, false, "", nil)
	if err == nil {
		err = sp.finish()
	}
	off.Release()
	if err != nil {
		sp.close()
		t.Fatalf("decoded in memory, but not into a spill: %v", err)
	}
	s.spill = sp
	defer s.Close()
	sameSpilled(t, s, mem, &fw)
}

// sameSpilled checks that the spilled snapshot s holds what mem, decoded
// in memory, holds: its stacks, each device's segments, events (read back
// through Chunk), reconstructed start (ReconstructFollowed with fw, which
// may be nil) and problems.
func sameSpilled(t *testing.T, s, mem *Snapshot, fw *Forward) {
	t.Helper()
	// The settings compared bit for bit: a fuzzed threshold may be NaN.
	gs, ws := s.Settings, mem.Settings
	gf, wf := math.Float64bits(gs.GarbageCollectionThreshold), math.Float64bits(ws.GarbageCollectionThreshold)
	gs.GarbageCollectionThreshold, ws.GarbageCollectionThreshold = 0, 0
	if !reflect.DeepEqual(s.Stacks, mem.Stacks) || gs != ws || gf != wf {
		t.Fatalf("spilled: %d stacks, in memory %d (or the settings differ)", len(s.Stacks), len(mem.Stacks))
	}
	for i, d := range s.Devices {
		if i < len(mem.Devices) && !reflect.DeepEqual(d.Segments, mem.Devices[i].Segments) {
			t.Fatalf("device %d: spilled, the segments differ from the in-memory ones", d.Index)
		}
	}
	if len(s.Devices) != len(mem.Devices) {
		t.Fatalf("spilled: %d devices, in memory %d", len(s.Devices), len(mem.Devices))
	}
	for i, d := range s.Devices {
		m := mem.Devices[i]
		if d.Len() != m.Len() {
			t.Fatalf("device %d: spilled %d events, in memory %d", d.Index, d.Len(), m.Len())
		}
		buf := make([]trace.Event, ChunkSize)
		for lo := int64(0); lo < d.Len(); lo += ChunkSize {
			hi := min(d.Len(), lo+ChunkSize)
			got, err := d.Chunk(lo, hi, buf)
			if err != nil {
				t.Fatal(err)
			}
			if want := m.Events[lo:hi]; !slices.Equal(got, want) {
				t.Fatalf("device %d: spilled events [%d, %d) differ from the in-memory ones", d.Index, lo, hi)
			}
		}
		got, err := d.ReconstructFollowed(fw, roundSize)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := m.Reconstruct(roundSize)
		if !slices.Equal(got, want) || d.Truncated != m.Truncated {
			t.Fatalf("device %d: spilled, Reconstruct gives %d events (truncated %v), in memory %d (%v)",
				d.Index, len(got), d.Truncated, len(want), m.Truncated)
		}
		gp, wp := d.Validate(), m.Validate()
		if len(gp) != len(wp) {
			t.Fatalf("device %d: spilled, %d problems; in memory %d", d.Index, len(gp), len(wp))
		}
		for j := range gp {
			if gp[j].String() != wp[j].String() {
				t.Fatalf("device %d: spilled, problem %q; in memory %q", d.Index, gp[j], wp[j])
			}
		}
	}
}
