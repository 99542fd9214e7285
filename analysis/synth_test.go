package analysis_test

import (
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/analysis/analysistest"
	"github.com/tracer-dev/tracer/trace"
)

// A realistic synthetic stream ends empty and consistent: every free
// matched, every counter back to zero, the timeline's maxima equal to the
// peaks, and the segment layout adds up.
func TestSummarizer_syntheticTraining(t *testing.T) {
	s := analysis.NewSummarizer(analysis.Options{TimelineBuckets: 256})
	n := analysistest.Training(7, 300_000, func(ev *trace.Event) { s.Event(ev) })
	sum := s.Finalize()
	if sum.Events != int64(n) || sum.Unmatched != 0 || sum.Approximate {
		t.Fatalf("Events %d (want %d), Unmatched %d, Approximate %v", sum.Events, n, sum.Unmatched, sum.Approximate)
	}
	for _, k := range []string{"allocated_bytes.all.current", "reserved_bytes.all.current",
		"active_bytes.all.current", "requested_bytes.all.current", "segment.all.current",
		"inactive_split_bytes.all.current", "allocation.all.current"} {
		if sum.Stats[k] != 0 {
			t.Errorf("%s = %d at the end, want 0", k, sum.Stats[k])
		}
	}
	if sum.Stats["allocation.all.allocated"] != sum.Stats["allocation.all.freed"] {
		t.Errorf("allocated %d != freed %d", sum.Stats["allocation.all.allocated"], sum.Stats["allocation.all.freed"])
	}
	if len(sum.Timeline.Buckets) > 256 {
		t.Errorf("%d buckets, want ≤ 256", len(sum.Timeline.Buckets))
	}
	peaks := map[analysis.Series]analysis.Bytes{
		analysis.Allocated: sum.Peaks.Allocated.Bytes, analysis.Reserved: sum.Peaks.Reserved.Bytes,
		analysis.Active: sum.Peaks.Active.Bytes, analysis.Requested: sum.Peaks.Requested.Bytes,
	}
	for k, want := range peaks {
		var got float64
		for _, b := range sum.Timeline.Buckets {
			got = max(got, b.Series[k].Max.Value)
		}
		if got != float64(want) {
			t.Errorf("timeline max of %v = %g, want peak %d", k, got, want)
		}
	}
	var total analysis.Bytes
	for _, g := range sum.Segments {
		if g.Allocated+g.PendingFree+g.SplitFree+g.Free != g.Size {
			t.Errorf("segment %#x parts do not add up: %+v", g.Addr, g)
		}
		total += g.Size
	}
	if total != sum.Peaks.Reserved.Bytes {
		t.Errorf("segments at the reserved peak sum to %d, want %d", total, sum.Peaks.Reserved.Bytes)
	}
	if sum.Stats["num_ooms"] == 0 || len(sum.Sites) == 0 || sum.Lifetimes.Count == 0 || sum.Grow == nil {
		t.Errorf("synthetic stream lacks OOMs, sites, lifetimes or grows: %d %d %d %v",
			sum.Stats["num_ooms"], len(sum.Sites), sum.Lifetimes.Count, sum.Grow)
	}
	var sites analysis.Bytes
	for _, x := range append(sum.Sites, sum.Other) {
		sites += x.BlockBytes
	}
	if sites != sum.Peaks.Allocated.Bytes {
		t.Errorf("sites at the peak sum to %d, want the allocated peak %d", sites, sum.Peaks.Allocated.Bytes)
	}
}
