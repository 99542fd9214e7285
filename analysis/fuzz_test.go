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
	// Records whose first byte is 0xF0 or more are scope edges (annotations).
	f.Add([]byte{0xF0, 0, 0, 0, 0, 1, 4, 0, 8, 1, 0, 2, 1, 0, 2, 1, 0, 3, 0xF1, 0, 0, 0, 0, 4, 0xF1, 1, 0, 0, 0, 0, 3, 0, 2, 1, 0, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		var as []trace.Annotation
		for i := 0; i+6 <= len(data); i += 6 {
			if d := data[i : i+6]; d[0] >= 0xF0 {
				stage := trace.AnnotationStart
				if d[0]&1 == 1 {
					stage = trace.AnnotationEnd
				}
				as = append(as, trace.Annotation{Name: [3]string{"forward", "backward", "step#1"}[d[1]%3],
					Stage: stage, Device: int32(d[2] % 2), TimeUs: int64(d[5]) * 10})
			}
		}
		trace.SortAnnotations(as)
		s := NewSummarizer(Options{TimelineBuckets: 8, Stacks: func(trace.StackID) trace.Stack { return nil }, Annotations: as})
		for i := 0; i+6 <= len(data); i += 6 {
			d := data[i : i+6]
			if d[0] >= 0xF0 {
				continue
			}
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
		// The phases' shares of the allocated peak make it up.
		if len(sum.Phases) > 0 {
			var live Bytes
			for _, p := range sum.Phases {
				live += p.LiveAtPeakBytes
			}
			if live != sum.Peaks.Allocated.Bytes {
				t.Fatalf("phases hold %d bytes at the allocated peak of %d: %+v", live, sum.Peaks.Allocated.Bytes, sum.Phases)
			}
		}
	})
}
