package trace_test

import (
	"bytes"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// WriterOptions.Events only sizes buffers: with it right, short or long,
// WriteEvents writes the same bytes as Write, whatever the calls' sizes.
func TestWriteEventsHint(t *testing.T) {
	const batch, n = 100, 1234
	write := func(hint int64, parts []int) []byte {
		var buf bytes.Buffer
		w := trace.NewWriter(&buf, meta(), trace.WriterOptions{BatchRows: batch, Events: hint})
		evs := sample(w, n)
		lo := 0
		for _, hi := range append(parts, len(evs)) {
			if hint < 0 {
				for i := lo; i < hi; i++ {
					if err := w.Write(&evs[i]); err != nil {
						t.Fatal(err)
					}
				}
			} else if err := w.WriteEvents(evs[lo:hi], nil); err != nil {
				t.Fatal(err)
			}
			lo = hi
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	want := write(-1, nil)
	for _, hint := range []int64{0, 1, 50, n, n + 1, 10 * n} {
		for _, parts := range [][]int{nil, {7}, {150, 150, 700}, {37, 1000, 1001}, {5, 17, 333, 900, 1200}} {
			if got := write(hint, parts); !bytes.Equal(got, want) {
				t.Errorf("hint %d, parts %v: %d bytes differ from Write's %d", hint, parts, len(got), len(want))
			}
		}
	}
}
