package record

import (
	"testing"

	"github.com/tracer-dev/tracer/record/torchsnap"
)

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
