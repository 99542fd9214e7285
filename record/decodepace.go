package record

import (
	"os"
	"sync"

	"github.com/tracer-dev/tracer/internal/gcpace"
	"github.com/tracer-dev/tracer/record/torchsnap"
)

// decodePercent is the collector's percentage (gcpace.SetPercent) while a
// file of up to torchsnap.ScratchMax decodes in memory. The import runs at
// 25 (ImportSnapshots) for its peak, which comes after the decode; while
// decoding, the live heap grows from a few MiB to tens, and at 25 the
// collector's stops and dedicated workers took the cores the decoder's
// thread needed. Larger files keep 25: their decode gained nothing and the
// heap it grew stayed resident at the import's peak (PERFORMANCE.md).
const decodePercent = 400

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
// holds, as does the import's pace for a file over torchsnap.ScratchMax.
func paceDecode(size int64) (end func()) {
	if os.Getenv("GOGC") != "" || size > torchsnap.ScratchMax {
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
