package analysis

import (
	"math/rand/v2"
	"testing"
)

// A bounded timeline keeps every series' global extremes exactly, however
// many merges happened.
func TestTimeline_boundedKeepsExtremes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := newTimelineBuilder(64)
	var lo, hi [numInt]int64
	var hiAt [numInt]int64
	for i := range lo {
		lo[i] = 1 << 62
	}
	const n = 100_003
	for e := int64(0); e < n; e++ {
		var v [numInt]int64
		for i := range v {
			v[i] = r.Int64N(1 << 30)
			if v[i] < lo[i] {
				lo[i] = v[i]
			}
			if v[i] > hi[i] {
				hi[i], hiAt[i] = v[i], e
			}
		}
		b.add(e, e, 1000+e, &v)
	}
	tl := b.finish(true, 1000)
	if len(tl.Buckets) > 64 {
		t.Fatalf("%d buckets, want ≤ 64", len(tl.Buckets))
	}
	if tl.Buckets[0].FirstEvent != 0 || tl.Buckets[len(tl.Buckets)-1].LastEvent != n-1 {
		t.Errorf("buckets cover [%d, %d], want [0, %d]", tl.Buckets[0].FirstEvent, tl.Buckets[len(tl.Buckets)-1].LastEvent, n-1)
	}
	for s := range numInt {
		gotLo, gotHi := 1e300, -1.0
		var gotHiAt int64
		env := tl.Series(Series(s), 1)
		for i := 0; i < env.Len(); i++ {
			_, y := env.XY(i)
			gotLo = min(gotLo, y)
			if y > gotHi {
				gotHi = y
			}
		}
		for _, bk := range tl.Buckets {
			if bk.Series[s].Max.Value == gotHi {
				gotHiAt = bk.Series[s].Max.Event
				break
			}
		}
		if gotLo != float64(lo[s]) || gotHi != float64(hi[s]) || gotHiAt != hiAt[s] {
			t.Errorf("%v: min %g max %g at %d, want %d, %d at %d", Series(s), gotLo, gotHi, gotHiAt, lo[s], hi[s], hiAt[s])
		}
	}
	// Envelope x values never decrease.
	env := tl.Series(Allocated, 1)
	px := -1.0
	for i := 0; i < env.Len(); i++ {
		x, _ := env.XY(i)
		if x < px {
			t.Fatalf("x decreases at point %d: %g after %g", i, x, px)
		}
		px = x
	}
}
