package analysis_test

import (
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/analysis/analysistest"
	"github.com/tracer-dev/tracer/trace"
)

// Options.FragmentationOnly gives the Fragmentation, Peaks and Stats of a
// full summary, field for field (the maxima's events included), on a
// synthetic stream whose timeline merges its buckets many times and on the
// real sample replayed under two settings; and it computes none of the
// rest.
func TestSummarizer_fragmentationOnly(t *testing.T) {
	type feed func(emit func(*trace.Event))
	training := func(emit func(*trace.Event)) { analysistest.Training(11, 200_000, emit) }
	sampleUnder := func(conf string) feed {
		return func(emit func(*trace.Event)) {
			if err := analysistest.Sample(conf, emit); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name string
		feed feed
	}{
		{"training", training},
		{"sample", sampleUnder("")},
		{"sample-expandable", sampleUnder("expandable_segments:True")},
	} {
		t.Run(c.name, func(t *testing.T) {
			full := analysis.NewSummarizer(analysis.Options{TimelineBuckets: 64})
			only := analysis.NewSummarizer(analysis.Options{TimelineBuckets: 64, FragmentationOnly: true})
			n := 0
			c.feed(func(ev *trace.Event) {
				full.Event(ev)
				only.Event(ev)
				n++
			})
			want, got := full.Finalize(), only.Finalize()
			if n < 1000 || want.Fragmentation.InactiveSplitMax.Bytes == 0 {
				t.Fatalf("%d events, inactive split max %d: the stream tests too little", n, want.Fragmentation.InactiveSplitMax.Bytes)
			}
			if !reflect.DeepEqual(got.Fragmentation, want.Fragmentation) {
				t.Errorf("Fragmentation\n got %+v\nwant %+v", got.Fragmentation, want.Fragmentation)
			}
			if got.Peaks != want.Peaks {
				t.Errorf("Peaks\n got %+v\nwant %+v", got.Peaks, want.Peaks)
			}
			if !reflect.DeepEqual(got.Stats, want.Stats) {
				t.Errorf("Stats\n got %v\nwant %v", got.Stats, want.Stats)
			}
			if got.Events != want.Events || got.Unmatched != want.Unmatched {
				t.Errorf("Events %d, Unmatched %d; want %d, %d", got.Events, got.Unmatched, want.Events, want.Unmatched)
			}
			if len(got.Timeline.Buckets) != 0 || len(got.Sites) != 0 || got.Grow != nil || len(got.Segments) != 0 {
				t.Errorf("computed more than asked: %d buckets, %d sites, grow %v, %d segments",
					len(got.Timeline.Buckets), len(got.Sites), got.Grow, len(got.Segments))
			}
		})
	}
}
