package record_test

import (
	"testing"

	"github.com/tracer-dev/tracer/record"
)

// FuzzParseWorkload: the parser never panics, and what it accepts runs on the
// simulated device's bookkeeping without surprises (the run is not fuzzed:
// counts may legitimately ask for billions of operations).
func FuzzParseWorkload(f *testing.F) {
	for _, w := range record.Builtins() {
		f.Add(w.Source)
	}
	f.Add([]byte("alloc a 1 count=2\nrepeat 3\n free a from=-1\nend\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		w, err := record.ParseWorkload("fuzz.workload", src)
		if err == nil && (w.Statements() == 0 || w.Name != "fuzz") {
			t.Fatalf("accepted a workload with %d statements, name %q", w.Statements(), w.Name)
		}
	})
}
