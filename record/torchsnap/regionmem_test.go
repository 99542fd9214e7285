package torchsnap

import (
	"bytes"
	"runtime"
	"testing"
)

// A mid-size file's regions, on a 16-core host, make chunk buffers of at
// most a quarter of the file's bytes in all: they are held through the
// decode, beside its events, where a trace of 16 MB has the import's
// whole budget of twice the file to fit in (issue 22). At eight chunks a
// worker and buffers twice their first read, they took 0.36 of it.
func TestRegionChunkRoom(t *testing.T) {
	w, mw := parWorkers, parMinWorkers
	parWorkers, parMinWorkers = 16, 1
	defer func() { parWorkers, parMinWorkers = w, mw }()
	checkChunkRoom(t, 4, "a quarter")
}

// A region's workers and chunks are sized by the file, not by the cores
// (regionPlan): a 16 MB file on 16 cores gets the fewest workers and its
// buffers in flight take a tenth of the file at most, where a worker a
// core and sixteen chunks a worker took 0.21 of it, which with the
// workers' tables put the decode of a 39 MB file over twice its size.
func TestRegionPlanByFile(t *testing.T) {
	for _, tc := range []struct {
		left               int64
		procs, least, most int
	}{
		{16 << 20, 16, 4, 5},
		{32 << 20, 16, 8, 10},
		{60 << 20, 16, 16, 16},
		{600 << 20, 16, 16, 16},
		{600 << 20, 4, 4, 4},
	} {
		w, csize := regionPlan(tc.left, tc.procs)
		if w < tc.least || w > tc.most {
			t.Errorf("%d MiB on %d cores: %d workers, want %d-%d", tc.left>>20, tc.procs, w, tc.least, tc.most)
		}
		if csize < parChunkMin || csize > parChunkMax {
			t.Errorf("%d MiB on %d cores: chunks of %d bytes, out of bounds", tc.left>>20, tc.procs, csize)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	checkChunkRoom(t, 10, "a tenth")
}

// checkChunkRoom decodes a 16 MB snapshot with regions and fails unless
// its chunk buffers take at most 1/frac of the file.
func checkChunkRoom(t *testing.T, frac int64, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip("a 16 MB snapshot")
	}
	var buf bytes.Buffer
	if err := writeSyntheticSnapshot(&buf, 200_000); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	minFile, minLeft := parMinFile, parMinLeft
	parMinFile, parMinLeft = 0, 0
	defer func() { parMinFile, parMinLeft = minFile, minLeft }()
	room0, events0 := chunkRoom.Load(), regionEvents.Load()
	s, err := decodeAt(&parSource{ra: bytes.NewReader(data), size: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	if n := regionEvents.Load() - events0; n < s.Devices[0].Len()*9/10 {
		t.Fatalf("%d of %d events decoded in regions", n, s.Devices[0].Len())
	}
	room := chunkRoom.Load() - room0
	share := float64(room) / float64(len(data))
	if room > int64(len(data))/frac {
		t.Errorf("chunk buffers of %d bytes for a file of %d (%.2f of it), want at most %s", room, len(data), share, what)
	} else {
		t.Logf("chunk buffers of %d bytes for a file of %d (%.2f of it)", room, len(data), share)
	}
}
