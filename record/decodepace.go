package record

import (
	"os"
	"sync"

	"github.com/tracer-dev/tracer/internal/gcpace"
)

// decodePercent is the collector's percentage (gcpace.SetPercent) while a
// file decodes in memory. The import runs at 25 (ImportSnapshots), for its
// peak, which comes after the decode: the validation's tables and the
// annotation's model beside the events. While decoding, the live heap (the
// memo, the frames lists, the workers' chunks) grows from a few MiB to
// tens, and at 25 the collector ran every few MiB of it, its stops and
// dedicated workers on the cores the decoder's thread needed. Only files
// up to decodePaceMax: above it (the seed experiment's 87 and 174 MB) the
// decode's shorter head was lost to the collections after it, and the
// heap it grew stayed resident beside the annotation's model, 15 MiB more
// at the import's peak.
var decodePercent = 400

// decodePaceMax is the largest file paceDecode applies to: the files whose
// packed events go to a scratch file (torchsnap.ReadFileMappedIn).
const decodePaceMax = 64 << 20

// decodePace counts the decodes in memory running, and holds the
// percentage from before the first.
var decodePace struct {
	mu   sync.Mutex
	n    int
	prev int
}

// paceDecode sets the collector's percentage to decodePercent for the
// decode in memory of a file of size bytes, and returns what sets the one
// before back once the last such decode has ended. A GOGC set by the user
// holds, as does the import's pace for a file over decodePaceMax.
func paceDecode(size int64) (end func()) {
	if os.Getenv("GOGC") != "" || size > decodePaceMax {
		return func() {}
	}
	decodePace.mu.Lock()
	defer decodePace.mu.Unlock()
	if decodePace.n == 0 {
		decodePace.prev = gcpace.SetPercent(decodePercent)
	}
	decodePace.n++
	return sync.OnceFunc(func() {
		decodePace.mu.Lock()
		defer decodePace.mu.Unlock()
		if decodePace.n--; decodePace.n == 0 {
			gcpace.SetPercent(decodePace.prev)
		}
	})
}
