package record

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tracer-dev/tracer/record/torchsnap"
)

// smallImportMax is the most bytes the import of graphs__default (7 KB,
// 64 events) may allocate, about twice what it does (0.68 MB, of which the
// stream writer's two pieces are 0.34): its buffers are sized to the work
// (the spill, the decoder's reads, the annotation's chunks and the model's
// nodes), where buffers sized for a large import made it allocate 2.3-2.7
// MB.
const smallImportMax = 1400 << 10

// TestSmallImportAllocates: the import of a small snapshot allocates
// little (smallImportMax), not the fixed cost of buffers sized for a large
// one, whatever the cores.
func TestSmallImportAllocates(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector allocates beside the program")
	}
	in := filepath.Join("..", "testdata", "snapshots", "graphs__default.pickle")
	out := filepath.Join(t.TempDir(), "out.arrows")
	for _, procs := range []int{2, 16} {
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			if _, err := importOne(context.Background(), in, out, ImportOptions{}); err != nil {
				t.Fatal(err) // the warm-up: what is made once per process
			}
			const imports = 5
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range imports {
				if _, err := importOne(context.Background(), in, out, ImportOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			if per := (after.TotalAlloc - before.TotalAlloc) / imports; per > smallImportMax {
				t.Errorf("GOMAXPROCS %d: an import of %s allocated %d bytes, want at most %d", procs, filepath.Base(in), per, smallImportMax)
			} else {
				t.Logf("GOMAXPROCS %d: %d bytes an import", procs, per)
			}
		}()
	}
}

// TestAnnotationChunks: an annotation has inFlight buffers of a chunk for
// a device of that many chunks or more, as it always had, a buffer a
// chunk for fewer, and buffers of its events for less than a chunk.
func TestAnnotationChunks(t *testing.T) {
	const c = torchsnap.ChunkSize
	for _, tc := range []struct {
		inFlight   int
		n          int64
		bufs, size int
	}{
		{4, 0, 1, 0}, {4, 1, 1, 1}, {4, 64, 1, 64}, {4, c, 1, c}, {4, c + 1, 2, c},
		{4, 3 * c, 3, c}, {4, 4 * c, 4, c}, {4, 100 * c, 4, c}, {34, 108_990, 34, c}, {8, 5*c + 7, 6, c},
	} {
		bufs, size := annotationChunks(tc.inFlight, tc.n)
		if bufs != tc.bufs || size != tc.size {
			t.Errorf("annotationChunks(%d, %d) = %d buffers of %d events, want %d of %d", tc.inFlight, tc.n, bufs, size, tc.bufs, tc.size)
		}
	}
}
