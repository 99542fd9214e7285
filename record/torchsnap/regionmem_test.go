package torchsnap

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// A mid-size file's regions, on a 16-core host, make chunk buffers of at
// most a quarter of the file's bytes in all: they are held through the
// decode, beside its events, where a trace of 16 MB has the import's
// whole budget of twice the file to fit in (issue 22). At eight chunks a
// worker and buffers twice their first read, they took 0.36 of it.
func TestRegionChunkRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("a 16 MB snapshot")
	}
	var buf bytes.Buffer
	if err := writeSyntheticSnapshot(&buf, 200_000); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	minFile, minLeft, w, mw := parMinFile, parMinLeft, parWorkers, parMinWorkers
	parMinFile, parMinLeft, parWorkers, parMinWorkers = 0, 0, 16, 1
	defer func() { parMinFile, parMinLeft, parWorkers, parMinWorkers = minFile, minLeft, w, mw }()
	room0, events0 := chunkRoom.Load(), regionEvents.Load()
	s, err := decodeAt(&parSource{ra: bytes.NewReader(data), size: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	if n := regionEvents.Load() - events0; n < s.Devices[0].Len()*9/10 {
		t.Fatalf("%d of %d events decoded in regions", n, s.Devices[0].Len())
	}
	if room := chunkRoom.Load() - room0; room > int64(len(data))/4 {
		t.Errorf("chunk buffers of %d bytes for a file of %d (%.2f of it), want at most a quarter", room, len(data), float64(room)/float64(len(data)))
	} else {
		t.Logf("chunk buffers of %d bytes for a file of %d (%.2f of it)", room, len(data), float64(room)/float64(len(data)))
	}
}

// Where the commits lag behind the workers, a mid-size file's region
// (its records in a scratch file) cuts at most regionSlack chunks beyond
// one a worker ahead of the commit, each of which holds its worker's
// result and its events unpacked, once decoded: the channels alone let 2
// a worker and 4 more wait, as they still do in a larger file's.
func TestRegionSlots(t *testing.T) {
	var buf bytes.Buffer
	if err := writeSyntheticSnapshot(&buf, 40_000); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	const workers = 16
	withRegions(t, 8<<10, workers)
	defer func() { commitHook = nil }()
	for _, c := range []struct{ serial, scratch bool }{{false, true}, {true, true}, {false, false}} {
		parSerial = c.serial
		waiting, commits := 0, 0
		commitHook = func(r *region) {
			if commits++; commits == 2 { // the walker cuts all it may meanwhile
				time.Sleep(50 * time.Millisecond)
			}
			waiting = max(waiting, len(r.order))
		}
		events0 := regionEvents.Load()
		src := &parSource{ra: bytes.NewReader(data), size: int64(len(data))}
		if c.scratch {
			src.offHeap, src.scratch = true, t.TempDir()
		}
		s, err := decodeAt(src)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if regionEvents.Load() == events0 || commits < 20 {
			t.Fatalf("%+v: %d commits", c, commits)
		}
		if bounded := waiting <= workers+regionSlack; bounded != c.scratch {
			t.Errorf("%+v: %d chunks waiting for their commit with %d workers (bound %d)", c, waiting, workers, workers+regionSlack)
		}
	}
}

// Where a region's events are packed as it decodes (ReadFileMapped and
// ReadFileMappedIn), its workers write them as records into buffers the
// packer reuses, and none into the store's mapped base: 96 bytes of fresh
// memory an event, and the packer's read of them, cost more than
// decoding them (issue 22). Where the scratch file cannot be written, the
// packer widens the records into the base, and the events are the same.
func TestRegionRecords(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the events are mapped on Linux only")
	}
	path, _ := syntheticFiles(t)
	want, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	withRegions(t, 64<<10, 4)
	defer func() { commitHook = nil }()
	for _, c := range []struct {
		name       string
		scratch    bool
		failWrites bool
	}{{"mapped", false, false}, {"scratch", true, false}, {"scratch, writes fail", true, true}} {
		commits := 0
		var rw *os.File
		commitHook = func(r *region) {
			if commits++; commits == 1 && c.failWrites {
				// The same file, read-only: the packer's writes fail (it
				// has had no job yet), the reads of records packed before
				// the region do not.
				rf := r.b.events.rf
				ro, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", rf.f.Fd()))
				if err != nil {
					t.Fatal(err)
				}
				rw, rf.f = rf.f, ro
			}
		}
		events0, base0, packed0 := regionEvents.Load(), regionBaseBytes.Load(), regionPacked.Load()
		var got *Snapshot
		if c.scratch {
			got, err = ReadFileMappedIn(path, t.TempDir())
		} else {
			got, err = ReadFileMapped(path)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		events, base, packed := regionEvents.Load()-events0, regionBaseBytes.Load()-base0, regionPacked.Load()-packed0
		n := got.Devices[0].Len()
		if events < n/2 {
			t.Fatalf("%s: %d of %d events decoded in regions", c.name, events, n)
		}
		if base != 0 {
			t.Errorf("%s: the regions' workers wrote %d bytes of events into the store for %d events (%.1f an event), want none",
				c.name, base, events, float64(base)/float64(events))
		}
		if c.failWrites == (packed >= events/2) {
			t.Errorf("%s: %d of the regions' %d events packed as they decoded", c.name, packed, events)
		}
		if c.failWrites {
			if d := got.Devices[0]; d.rf != nil || d.Events == nil {
				t.Fatalf("%s: device 0's events are not in memory", c.name)
			}
		}
		if !reflect.DeepEqual(chunked(t, got.Devices[0]), want.Devices[0].Events) {
			t.Errorf("%s: device 0's events differ from ReadFile's", c.name)
		}
		got.Close()
		if rw != nil {
			rw.Close()
		}
	}
}
