package torchsnap

import (
	"bytes"
	"os"
	"testing"
)

// FuzzDecode: the decoder must not panic or allocate without bound on any
// input; errors are fine. A successful decode must also survive
// reconstruction and validation, and undo must find a lost alloc as the
// forward walk does. Seeds: testdata/fuzz/FuzzDecode (made by
// testdata/make_fuzz_corpus.py: a tiny snapshot in every form) and one
// small real bare-list dump. Larger seeds (30 KB+) make the fuzzer spend its
// time minimizing instead of exploring.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{"testdata/segments_only.pickle"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, d := range s.Devices {
			for _, e := range d.Events {
				if e.Stack != -1 && (e.Stack < 0 || int(e.Stack) >= len(s.Stacks)) {
					t.Fatalf("event stack %d out of range (%d stacks)", e.Stack, len(s.Stacks))
				}
			}
			if got, want := newStartState(d).undo(d.Events), lostAllocRef(d.Events); got != want {
				t.Fatalf("undo reports a lost alloc %v, the forward walk %v", got, want)
			}
			if _, err := d.Reconstruct(roundSize); err != nil {
				t.Fatal(err)
			}
			d.Validate()
		}
	})
}
