package plots

import "github.com/tracer-dev/tracer/analysis"

// IdleDominated reports whether time would squeeze a trace's activity into a
// sliver: more than half of its time span passes between two consecutive
// events (model loading, data loading, a pause before training). Event index
// then shows the activity better; tracer plot's "--x auto" uses it.
func IdleDominated(sum *analysis.Summary) bool {
	tl := &sum.Timeline
	if !tl.HasTime || len(tl.Buckets) == 0 {
		return false
	}
	first, last := tl.Buckets[0].FirstTimeUs, tl.Buckets[len(tl.Buckets)-1].LastTimeUs
	span := last - first
	if span <= 0 {
		return false
	}
	var longest int64
	for i, b := range tl.Buckets {
		// Gaps inside a bucket are at most its own time range; between
		// buckets, from one's last event to the next's first.
		longest = max(longest, b.LastTimeUs-b.FirstTimeUs)
		if i > 0 {
			longest = max(longest, b.FirstTimeUs-tl.Buckets[i-1].LastTimeUs)
		}
	}
	return longest*2 > span
}
