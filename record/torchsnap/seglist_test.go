package torchsnap

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/trace"
)

// TestSegListMatchesSlice runs random inserts, removals, maps and cuts on a
// segList and on one forced flat (the sorted slice, the rule's own) and
// compares their ranges and finds after each.
func TestSegListMatchesSlice(t *testing.T) {
	treeSteps := 0
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tree, flat := newSegList(nil), &segList{isFlat: true}
		page := uint64(2 << 20)
		for step := range 400 {
			a := uint64(rng.IntN(64)) * page
			size := int64(1+rng.IntN(4)) * int64(page)
			stream := uint64(rng.IntN(2))
			mk := func() *segRange {
				return &segRange{addr: a, size: size, stream: stream, expandable: rng.IntN(2) == 0}
			}
			// A valid state in the first 20 seeds; in the others now and then
			// an overlap, which turns the map flat (compared too, from then on).
			if !tree.isFlat && tree.overlaps(a, a+uint64(size)) && (seed < 20 || step%50 != 49) {
				continue
			}
			switch op := rng.IntN(4); op {
			case 0:
				s := mk()
				c := *s
				tree.insert(s)
				flat.insert(&c)
			case 1:
				tree.removeStart(a)
				flat.removeStart(a)
			case 2:
				s := &segRange{addr: a, size: size, stream: stream, expandable: true, large: true}
				c := *s
				tree.mapRange(s)
				flat.mapRange(&c)
			case 3:
				tree.cut(a, size)
				flat.cut(a, size)
			}
			gl, fl := tree.list(), flat.list()
			if len(gl) != len(fl) {
				t.Fatalf("seed %d step %d: %d ranges, the slice %d", seed, step, len(gl), len(fl))
			}
			for i := range gl {
				if *gl[i] != *fl[i] {
					t.Fatalf("seed %d step %d: range %d is %+v, the slice's %+v", seed, step, i, *gl[i], *fl[i])
				}
			}
			q := uint64(rng.IntN(70)) * page / 2
			g1, ok1 := tree.find(q)
			g2, ok2 := flat.find(q)
			if ok1 != ok2 || (g1 == nil) != (g2 == nil) || g1 != nil && *g1 != *g2 {
				t.Fatalf("seed %d step %d: find(%#x) = %v %v, the slice's %v %v", seed, step, q, g1, ok1, g2, ok2)
			}
			if !tree.isFlat {
				treeSteps++
			}
		}
	}
	if treeSteps < 1000 {
		t.Fatalf("only %d steps compared the map itself", treeSteps)
	}
}

// churnEvents is the segment-churn axis of the import: n segments live at
// the end, and before them n segments allocated and freed, each below
// every live one.
func churnEvents(n int) (*Device, []trace.Event) {
	const seg = 2 << 20
	top := uint64(1) << 40
	d := &Device{}
	for i := range n {
		d.Segments = append(d.Segments, Segment{Addr: top + uint64(i)*seg, TotalSize: seg, Large: true})
	}
	var evs []trace.Event
	for i := range n {
		a := top - uint64(i+1)*seg
		evs = append(evs, trace.Event{Kind: trace.KindSegmentAlloc, Addr: a, Size: seg},
			trace.Event{Kind: trace.KindSegmentFree, Addr: a, Size: seg})
	}
	return d, evs
}

// TestSegListLogarithmic undoes the churn axis at n = 2^14 and fails when
// the ranges' map touched more than 8·log2(n) nodes per event.
func TestSegListLogarithmic(t *testing.T) {
	const n = 1 << 14
	d, evs := churnEvents(n)
	st := newStartState(d)
	st.segs.m.Visits = 0
	st.undo(evs)
	if st.segs.isFlat {
		t.Fatal("the ranges went flat")
	}
	if limit := 8 * bits.Len(n); st.segs.m.Visits/len(evs) > limit {
		t.Fatalf("%d nodes touched per event, want at most %d", st.segs.m.Visits/len(evs), limit)
	}
	if st.segs.Len() != n {
		t.Fatalf("%d ranges at the start, want %d", st.segs.Len(), n)
	}
}

// BenchmarkSegmentChurn undoes the churn axis at n, 2n, 4n and 8n and
// reports the time's growth exponent (1 is linear).
func BenchmarkSegmentChurn(b *testing.B) {
	ns := []int{10000, 20000, 40000, 80000}
	times := make([]time.Duration, len(ns))
	for range b.N {
		for i, n := range ns {
			d, evs := churnEvents(n)
			st := newStartState(d)
			start := time.Now()
			st.undo(evs)
			times[i] += time.Since(start)
		}
	}
	var sx, sy, sxx, sxy float64
	for i, n := range ns {
		x, y := math.Log(float64(n)), math.Log(float64(times[i])+1)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	k := float64(len(ns))
	b.ReportMetric((k*sxy-sx*sy)/(k*sxx-sx*sx), "growth-exp")
}
