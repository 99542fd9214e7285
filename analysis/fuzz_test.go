package analysis

import (
	"encoding/binary"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// FuzzSummarizer feeds arbitrary event sequences: inconsistent traces
// (double frees, frees of unknown blocks, overlapping segments, absurd
// sizes and stack ids) must never panic, and counters must stay coherent.
func FuzzSummarizer(f *testing.F) {
	f.Add([]byte{4, 0, 8, 1, 0, 0, 1, 0, 2, 1, 0, 0, 3, 0, 2, 1, 0, 0})
	f.Add([]byte{6, 0, 8, 1, 0, 0, 1, 0, 4, 0, 0, 0, 7, 0, 4, 2, 0, 0, 9, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewSummarizer(Options{TimelineBuckets: 8, Stacks: func(trace.StackID) trace.Stack { return nil }})
		for i := 0; i+6 <= len(data); i += 6 {
			d := data[i : i+6]
			ev := trace.Event{
				Seq:       int64(i / 6),
				TimeUs:    int64(d[5]) * 10,
				Kind:      trace.Kind(d[0] % 11),
				Addr:      uint64(d[1]) << 20,
				Size:      int64(int8(d[2])) << 19,
				BlockSize: int64(d[3]) << 19,
				Stack:     trace.StackID(int32(binary.LittleEndian.Uint16(d[3:5])) - 2),
				Flags:     trace.Flags(d[4] & 3),
			}
			s.Event(&ev)
		}
		sum := s.Finalize()
		for _, g := range sum.Segments {
			if g.Allocated+g.PendingFree+g.SplitFree+g.Free != g.Size {
				t.Fatalf("segment parts do not add up: %+v", g)
			}
		}
		if len(sum.Timeline.Buckets) > 8 {
			t.Fatalf("%d buckets, want ≤ 8", len(sum.Timeline.Buckets))
		}
	})
}
