package record

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// On 4 cores or more, a snapshot of 23 MB is decoded in memory, where its
// import's peak is within twice the file and its decode about twice as
// fast; one of 21 MB goes through a spill, whose peak is lower, and so
// does any on fewer cores (issue 22). Only the files' sizes matter: they
// are sparse.
func TestDecodesInMemoryThreshold(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mid, small := file("mid.pickle", 23e6), file("small.pickle", 21e6)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	for _, tc := range []struct {
		procs int
		ins   []string
		want  bool
	}{
		{16, []string{mid}, true},
		{4, []string{small, mid}, true},
		{16, []string{small}, false},
		{2, []string{mid}, false},
	} {
		runtime.GOMAXPROCS(tc.procs)
		if got := decodesInMemory(tc.ins); got != tc.want {
			t.Errorf("GOMAXPROCS %d, %d inputs: decodesInMemory %v, want %v", tc.procs, len(tc.ins), got, tc.want)
		}
	}
}
