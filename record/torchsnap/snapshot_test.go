package torchsnap

import (
	"path/filepath"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

const snapDir = "../../testdata/snapshots"

func realSnapshots(t testing.TB) []string {
	files, err := filepath.Glob(filepath.Join(snapDir, "*.pickle"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no snapshots in %s: %v", snapDir, err)
	}
	return files
}

func name(path string) string {
	b := filepath.Base(path)
	return b[:len(b)-len(filepath.Ext(b))]
}

// TestReadFile_matchesGopickle decodes every real snapshot with the fast
// decoder and with gopickle's generic one, and compares every field.
func TestReadFile_matchesGopickle(t *testing.T) {
	for _, path := range realSnapshots(t) {
		t.Run(name(path), func(t *testing.T) {
			got, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sameSnapshot(t, got, refDecode(t, path))
			counts := map[trace.Kind]int{}
			for _, d := range got.Devices {
				for _, e := range d.Events {
					counts[e.Kind]++
				}
			}
			t.Logf("devices %d stacks %d counts %v settings %s", len(got.Devices), len(got.Stacks), counts, got.Settings.JSON)
		})
	}
}
