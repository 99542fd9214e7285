package plots

import (
	"testing"

	"github.com/tracer-dev/tracer/analysis"
)

func TestIdleDominated(t *testing.T) {
	mk := func(times ...int64) *analysis.Summary {
		s := &analysis.Summary{}
		s.Timeline.HasTime = true
		for i := 0; i+1 < len(times); i += 2 {
			s.Timeline.Buckets = append(s.Timeline.Buckets, analysis.Bucket{FirstTimeUs: times[i], LastTimeUs: times[i+1]})
		}
		return s
	}
	if !IdleDominated(mk(0, 10, 5_000_000, 5_500_000)) {
		t.Error("a 5 s pause before 0.5 s of activity is idle-dominated")
	}
	if IdleDominated(mk(0, 100, 110, 200, 210, 300)) {
		t.Error("evenly spread activity is not idle-dominated")
	}
	if IdleDominated(&analysis.Summary{}) {
		t.Error("a trace without times has no idle time")
	}
}
