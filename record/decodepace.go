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
// dedicated workers on the cores the decoder's thread needed.
var decodePercent = 400

// decodePace counts the decodes in memory running, and holds the
// percentage from before the first.
var decodePace struct {
	mu   sync.Mutex
	n    int
	prev int
}

// paceDecode sets the collector's percentage to decodePercent for a decode
// in memory, and returns what sets the one before back once the last such
// decode has ended. A GOGC set by the user holds.
func paceDecode() (end func()) {
	if os.Getenv("GOGC") != "" {
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
