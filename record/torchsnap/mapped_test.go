package torchsnap

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"unsafe"
)

// ReadFileMapped decodes what ReadFile decodes, with regions and without,
// keeps the events out of the Go heap (on Linux), and after Close leaves
// no device a view of the memory it gave back.
func TestReadFileMapped(t *testing.T) {
	path, cut := syntheticFiles(t)
	for _, regions := range []bool{false, true} {
		if regions {
			withRegions(t, 64<<10, 4)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		packed0 := regionPacked.Load()
		got, err := ReadFileMapped(path)
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		var events int64
		for _, d := range got.Devices {
			events += d.Len()
		}
		bytesOfEvents := events * int64(unsafe.Sizeof(cev{}))
		if runtime.GOOS == "linux" {
			if got.mapped == nil {
				t.Fatalf("regions %v: the events are not mapped", regions)
			}
			if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > bytesOfEvents/4 {
				t.Errorf("regions %v: the heap grew by %d bytes for %d bytes of events: they are on it", regions, grew, bytesOfEvents)
			}
		}
		want, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want.mapped != nil {
			t.Fatal("ReadFile mapped its events")
		}
		if runtime.GOOS == "linux" {
			// Packed (pack.go): the devices read records, widened by
			// Chunk to what ReadFile decodes; with regions, most of them
			// were packed while the regions decoded.
			if packed := regionPacked.Load() - packed0; regions && packed < events/2 {
				t.Errorf("regions: %d of %d events packed as the regions decoded", packed, events)
			}
			for i, d := range got.Devices {
				if d.Events != nil || d.recs == nil {
					t.Fatalf("regions %v: device %d is not packed", regions, d.Index)
				}
				if !reflect.DeepEqual(chunked(t, d), want.Devices[i].Events) {
					t.Fatalf("regions %v: device %d's packed events differ from ReadFile's", regions, d.Index)
				}
			}
		}
		recs := make([][]srec, len(got.Devices))
		for i, d := range got.Devices {
			if d.recs != nil {
				recs[i], d.recs, d.Events = d.recs, nil, want.Devices[i].Events
			}
		}
		mapped := got.mapped
		got.mapped = nil
		discs := make([]*discarder, len(got.Devices))
		for i, d := range got.Devices {
			discs[i], d.disc = d.disc, nil
		}
		// The regions' spans: the same bytes, at other times.
		if len(got.Regions) != len(want.Regions) {
			t.Fatalf("regions %v: ReadFileMapped ran %d regions, ReadFile %d", regions, len(got.Regions), len(want.Regions))
		}
		for i, r := range got.Regions {
			if r.Off != want.Regions[i].Off || r.End != want.Regions[i].End {
				t.Fatalf("regions %v: ReadFileMapped's region %d spans bytes %d-%d, ReadFile's %d-%d", regions, i, r.Off, r.End, want.Regions[i].Off, want.Regions[i].End)
			}
		}
		spans := got.Regions
		got.Regions, want.Regions = nil, nil
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("regions %v: ReadFileMapped and ReadFile decode differently", regions)
		}
		got.Regions = spans
		got.mapped = mapped
		for i, d := range got.Devices {
			d.disc = discs[i]
			if recs[i] != nil {
				d.recs, d.Events = recs[i], nil
			}
		}
		if events < 100_000 {
			t.Fatalf("regions %v: %d events", regions, events)
		}
		got.Close()
		for _, d := range got.Devices {
			if d.Events != nil || d.recs != nil {
				t.Errorf("regions %v: device %d keeps %d events after Close", regions, d.Index, d.Len())
			}
		}
		got.Close() // twice is harmless
	}
	// A truncated file fails as ReadFile fails, and gives its memory back.
	_, werr := ReadFile(cut)
	_, gerr := ReadFileMapped(cut)
	if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
		t.Errorf("truncated file: ReadFile says %v, ReadFileMapped %v", werr, gerr)
	}
}

// Every repository snapshot, the multi-device one among them, reads through
// Chunk from ReadFileMapped's packed records what ReadFile decodes, with
// the same devices, segments and stacks.
func TestReadFileMappedSnapshots(t *testing.T) {
	packed := readsAsReadFile(t, ReadFileMapped, func(d *Device) bool { return d.recs != nil })
	if runtime.GOOS == "linux" && packed == 0 {
		t.Error("no device packed")
	}
}

// readsAsReadFile checks that read gives every repository snapshot's
// devices, segments, stacks and, through Chunk, events as ReadFile does,
// or fails as it fails, and returns how many devices were in whatever
// form in says.
func readsAsReadFile(t *testing.T, read func(path string) (*Snapshot, error), in func(*Device) bool) int {
	t.Helper()
	files, _ := filepath.Glob("../../testdata/snapshots/*.pickle")
	more, _ := filepath.Glob("testdata/*.pickle")
	files = append(files, more...)
	if len(files) < 10 {
		t.Fatalf("%d snapshots", len(files))
	}
	var n int
	for _, path := range files {
		want, werr := ReadFile(path)
		got, gerr := read(path)
		if werr != nil || gerr != nil {
			if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
				t.Errorf("%s: ReadFile says %v, the other reader %v", path, werr, gerr)
			}
			continue
		}
		if len(got.Devices) != len(want.Devices) || !reflect.DeepEqual(got.Stacks, want.Stacks) {
			t.Fatalf("%s: devices or stacks differ", path)
		}
		for i, d := range got.Devices {
			w := want.Devices[i]
			if in(d) {
				n++
			}
			evs := chunked(t, d)
			if d.Index != w.Index || !reflect.DeepEqual(evs, w.Events) && (len(evs) > 0 || len(w.Events) > 0) ||
				!reflect.DeepEqual(d.Segments, w.Segments) || !reflect.DeepEqual(d.Skipped, w.Skipped) {
				t.Errorf("%s: device %d differs from ReadFile's", path, d.Index)
			}
		}
		got.Close()
	}
	return n
}

// chunked reads d's events through Chunk, a chunk at a time.
func chunked(t *testing.T, d *Device) []cev {
	t.Helper()
	var evs []cev
	buf := make([]cev, ChunkSize)
	for lo := int64(0); lo < d.Len(); lo += ChunkSize {
		ch, err := d.Chunk(lo, min(d.Len(), lo+ChunkSize), buf)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ch...)
	}
	return evs
}

// syntheticFiles writes a synthetic snapshot of 100k events, and its first
// half, to files of their own.
func syntheticFiles(t *testing.T) (path, cut string) {
	t.Helper()
	var buf bytes.Buffer
	if err := writeSyntheticSnapshot(&buf, 100_000); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, cut = filepath.Join(dir, "synthetic.pickle"), filepath.Join(dir, "cut.pickle")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, buf.Bytes()[:buf.Len()/2], 0o644); err != nil {
		t.Fatal(err)
	}
	return path, cut
}
