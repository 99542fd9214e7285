package torchsnap

import (
	"os"
	"reflect"
	"runtime"
	"testing"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// ReadFileMappedIn decodes what ReadFile decodes, with regions and
// without, its packed events in a scratch file that is never seen in its
// directory, read back through Chunk and by the parallel start state; the
// mapping keeps none of their memory; a truncated file fails as ReadFile
// fails, and leaves nothing behind.
func TestReadFileMappedIn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the events are mapped on Linux only")
	}
	path, cut := syntheticFiles(t)
	want, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	left := func(when string) {
		if es, _ := os.ReadDir(dir); len(es) != 0 {
			t.Fatalf("%s: %d files left in the scratch directory (%s)", when, len(es), es[0].Name())
		}
	}
	defer func(n, procs int) { parallelStartMin = n; runtime.GOMAXPROCS(procs) }(parallelStartMin, runtime.GOMAXPROCS(4))
	parallelStartMin = 1
	for _, regions := range []bool{false, true} {
		if regions {
			withRegions(t, 64<<10, 4)
		}
		got, err := ReadFileMappedIn(path, dir)
		if err != nil {
			t.Fatal(err)
		}
		left("decoded")
		if !got.Spilled() || got.rf == nil {
			t.Fatalf("regions %v: the records are not in a scratch file", regions)
		}
		var events int64
		for _, d := range got.Devices {
			events += d.Len()
		}
		if res := residentBytes(t, got.mapped); res > events*recSize/16 {
			t.Errorf("regions %v: %d bytes of the events' mapping resident after the decode (the records of %d events take %d)", regions, res, events, events*recSize)
		}
		for i, d := range got.Devices {
			if d.Events != nil || d.recs != nil || d.rf == nil {
				t.Fatalf("regions %v: device %d's events are not in the scratch file", regions, d.Index)
			}
			if !reflect.DeepEqual(chunked(t, d), want.Devices[i].Events) {
				t.Fatalf("regions %v: device %d's events read back differ from ReadFile's", regions, d.Index)
			}
			w := want.Devices[i]
			if !reflect.DeepEqual(d.Segments, w.Segments) || !reflect.DeepEqual(d.Skipped, w.Skipped) {
				t.Fatalf("regions %v: device %d's state differs from ReadFile's", regions, d.Index)
			}
			par, parUnseen, ok := d.parallelStart()
			if !ok {
				t.Fatalf("regions %v: parallelStart declined", regions)
			}
			undo := newStartState(w)
			undoUnseen, err := undo.undoDevice(w)
			if err != nil {
				t.Fatal(err)
			}
			sameStart(t, par, undo)
			if parUnseen != undoUnseen {
				t.Errorf("regions %v: unseen free: parallel %v, undo %v", regions, parUnseen, undoUnseen)
			}
		}
		if events < 100_000 || !reflect.DeepEqual(got.Stacks, want.Stacks) {
			t.Fatalf("regions %v: %d events, or the stacks differ", regions, events)
		}
		got.Close()
		for _, d := range got.Devices {
			if d.rf != nil || d.Len() != 0 {
				t.Errorf("regions %v: device %d keeps %d events after Close", regions, d.Index, d.Len())
			}
		}
		got.Close() // twice is harmless
		left("closed")
	}
	_, werr := ReadFile(cut)
	_, gerr := ReadFileMappedIn(cut, dir)
	if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
		t.Errorf("truncated file: ReadFile says %v, ReadFileMappedIn %v", werr, gerr)
	}
	left("failed")
}

// Every repository snapshot, the multi-device one among them, reads back
// from ReadFileMappedIn's scratch file what ReadFile decodes.
func TestReadFileMappedInSnapshots(t *testing.T) {
	dir := t.TempDir()
	read := func(path string) (*Snapshot, error) { return ReadFileMappedIn(path, dir) }
	if n := readsAsReadFile(t, read, func(d *Device) bool { return d.rf != nil }); runtime.GOOS == "linux" && n == 0 {
		t.Error("no device's events in a scratch file")
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("%d files left in the scratch directory", len(es))
	}
}

// residentBytes is how many bytes of m are resident.
func residentBytes(t *testing.T, m []byte) int64 {
	t.Helper()
	g := grow.PagesOf(m)
	n, ok := g.Resident(0, g.Len())
	if !ok {
		t.Skip("mincore failed")
	}
	return int64(n) * int64(os.Getpagesize())
}

// A store whose packing stopped part of the way (a chunk outside its base)
// reads the packed events back from its scratch file, one at a time (get)
// and in a device's run copied whole (gatherRun), as they were added.
func TestRecFilePartlyPacked(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the events are mapped on Linux only")
	}
	b := newBuilder()
	b.events.offHeap, b.events.scratch = true, t.TempDir()
	b.events.sizeFor(1 << 20)
	defer b.events.release()
	if b.events.rf == nil {
		t.Fatal("no scratch file for a 1 MiB file's records")
	}
	const n, packed = 5000, 3000
	want := make([]cev, n)
	for i := range want {
		e := cev{Kind: trace.KindAlloc, Addr: 1<<32 + uint64(i)*512, Size: int64(512 + i), Stream: 7, TimeUs: int64(i), Stack: trace.StackID(i % 5)}
		b.events.add(&e)
		want[i] = e
	}
	b.events.packTo(packed)
	b.events.packStop = true
	if b.events.packed != packed {
		t.Fatalf("%d events packed, want %d", b.events.packed, packed)
	}
	for _, i := range []int64{0, 1, packed - 1, packed, n - 1} {
		if e, ok := b.events.get(i); !ok || *e != want[i] {
			t.Fatalf("event %d: %+v (%v), want %+v", i, e, ok, want[i])
		}
	}
	d := &Device{Index: 3}
	got, err := b.gatherRun(&listObj{evLo: 0, evN: n}, d)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Device = 3
	}
	if d.rf != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the run copied differs from the events added (device reads the file: %v)", d.rf != nil)
	}
}

// A mid-size file decoded with its records in a scratch file collects
// its head's garbage once, before its first region, so that the region's
// buffers and tables reuse it (collectHead); ReadFileMapped, as a larger
// file's decode, does not.
func TestCollectHead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the events are mapped on Linux only")
	}
	path, _ := syntheticFiles(t)
	withRegions(t, 64<<10, 4)
	for _, scratch := range []bool{true, false} {
		n0 := headCollections.Load()
		var s *Snapshot
		var err error
		if scratch {
			s, err = ReadFileMappedIn(path, t.TempDir())
		} else {
			s, err = ReadFileMapped(path)
		}
		if err != nil {
			t.Fatal(err)
		}
		regions := len(s.Regions)
		s.Close()
		want := int64(0)
		if scratch {
			want = 1
		}
		if n := headCollections.Load() - n0; n != want || regions == 0 {
			t.Errorf("scratch file %v: %d collections before the regions (%d regions), want %d", scratch, n, regions, want)
		}
	}
}
