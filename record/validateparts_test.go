package record

import (
	"runtime"
	"testing"
)

// TestValidateParts: the import's validation takes the cores beside the
// annotation's, up to 8 parts: on the GPU host's 16 cores each of 4 parts
// took longer than the annotation; on 2 to 8 cores it takes no more than
// it did (one part at 4 cores).
func TestValidateParts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct{ procs, parts int }{{1, 1}, {2, 1}, {4, 1}, {8, 2}, {12, 5}, {16, 8}, {64, 8}} {
		runtime.GOMAXPROCS(c.procs)
		if got := validateParts(); got != c.parts {
			t.Errorf("GOMAXPROCS=%d: %d validation parts, want %d", c.procs, got, c.parts)
		}
	}
}
