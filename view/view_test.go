package view

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/analysis/analysistest"
	"github.com/tracer-dev/tracer/trace"
)

// synthetic returns a built Trace of a synthetic training stream of about
// n events, and the byte series after each event as a fresh Summarizer
// computes them.
func synthetic(t testing.TB, n int) (*Trace, []analysis.Levels) {
	t.Helper()
	tr := &Trace{Name: "synthetic", Label: "recorded"}
	b := newBuilder(tr)
	analysistest.Training(11, n, b.add)
	for i := range 80 {
		tr.stacks = append(tr.stacks, trace.Stack{{Name: "inner", File: "/usr/lib/python3/site-packages/torch/x.py", Line: 1},
			{Name: "layer", File: "model.py", Line: int32(i)}, {Name: "main", File: "train.py", Line: 9}})
	}
	if err := b.finish(nil); err != nil {
		t.Fatal(err)
	}
	tr.placeMarks() // x is the event index, as Load makes it by default
	s := analysis.NewSummarizer(analysis.Options{})
	levels := make([]analysis.Levels, len(tr.evs))
	for i := range tr.evs {
		ev := tr.evs[i].full(0, int64(i))
		s.Event(&ev)
		levels[i] = s.Levels()
	}
	return tr, levels
}

// Each column holds exactly the minima and maxima of its events, the
// columns are disjoint and cover the range, and zoomed in far enough the
// columns are the events themselves, with their exact values.
func TestColumns(t *testing.T) {
	tr, levels := synthetic(t, 60_000)
	n := tr.Events()
	for _, tc := range []struct {
		x0, x1 int64
		cols   int
	}{{0, n - 1, 1000}, {0, n - 1, 7}, {12_345, 40_001, 333}, {30_000, 30_100, 800}, {n - 50, n + 100, 100}, {5, 5, 10}} {
		c := tr.Columns(tc.x0, tc.x1, tc.cols)
		if len(c.FirstEvent) == 0 || len(c.FirstEvent) > max(tc.cols, 2*int(tc.x1-tc.x0+3)) {
			t.Fatalf("%+v: %d columns", tc, len(c.FirstEvent))
		}
		if c.FirstEvent[0] > max(tc.x0-1, 0) || c.LastEvent[len(c.LastEvent)-1] < min(tc.x1, n-1) {
			t.Errorf("%+v: columns cover events %d to %d", tc, c.FirstEvent[0], c.LastEvent[len(c.LastEvent)-1])
		}
		checkColumns(t, fmt.Sprintf("%+v", tc), c, levels)
		if wantExact := tc.x1-tc.x0 < 2*int64(tc.cols)-4; c.Exact != wantExact {
			t.Errorf("%+v: Exact %v", tc, c.Exact)
		}
	}
	// No peak is lost at any zoom.
	whole := tr.Columns(0, n-1, 50)
	var peak int64
	for _, v := range whole.Max[0] {
		peak = max(peak, v)
	}
	if peak != int64(tr.sum.Peaks.Allocated.Bytes) {
		t.Errorf("max over 50 columns %d, allocated peak %d", peak, tr.sum.Peaks.Allocated.Bytes)
	}
}

// checkColumns checks that the columns are contiguous and hold the exact
// minima and maxima of their events.
func checkColumns(t *testing.T, name string, c *Columns, levels []analysis.Levels) {
	t.Helper()
	for j := range c.FirstEvent {
		if j > 0 && c.FirstEvent[j] != c.LastEvent[j-1]+1 {
			t.Fatalf("%s: column %d starts at %d after %d", name, j, c.FirstEvent[j], c.LastEvent[j-1])
		}
		for k := range numSeries {
			lo, hi, at := int64(1<<62), int64(-1), int64(-1)
			for i := c.FirstEvent[j]; i <= c.LastEvent[j]; i++ {
				v := levelsOf(levels[i])[k]
				lo = min(lo, v)
				if v > hi {
					hi, at = v, i
				}
			}
			if c.Min[k][j] != lo || c.Max[k][j] != hi || c.MaxEvent[k][j] != at {
				t.Fatalf("%s: column %d (events %d-%d) %s: min %d max %d at %d, want %d %d at %d", name, j,
					c.FirstEvent[j], c.LastEvent[j], seriesNames[k], c.Min[k][j], c.Max[k][j], c.MaxEvent[k][j], lo, hi, at)
			}
		}
	}
	for j := 1; j < len(c.XStart); j++ {
		if c.XStart[j] < c.XEnd[j-1] {
			t.Fatalf("%s: column %d starts at x %d, before the last ends (%d)", name, j, c.XStart[j], c.XEnd[j-1])
		}
	}
}

// On a time axis, columns split the range by time: each holds the events
// whose time falls in it, exactly reduced, and firstAt inverts x.
func TestColumns_time(t *testing.T) {
	tr, levels := synthetic(t, 60_000)
	tr.hasTime = true
	n := tr.Events()
	xmax := tr.x(n - 1)
	for _, x := range []int64{-5, 0, 1, xmax / 3, xmax - 1, xmax, xmax + 9} {
		i := tr.firstAt(x)
		if i < n && tr.x(i) < x || i > 0 && tr.x(i-1) >= x {
			t.Errorf("firstAt(%d) = %d: x %d, before it %d", x, i, tr.x(min(i, n-1)), tr.x(max(i-1, 0)))
		}
	}
	for _, r := range [][2]int64{{0, xmax}, {xmax / 4, xmax / 2}, {xmax / 2, xmax/2 + 50}} {
		c := tr.Columns(r[0], r[1], 500)
		checkColumns(t, fmt.Sprint(r), c, levels)
		if c.FirstEvent[0] > max(tr.firstAt(r[0])-1, 0) || c.LastEvent[len(c.LastEvent)-1] < tr.firstAt(r[1]+1)-1 {
			t.Errorf("%v: columns hold events %d to %d", r, c.FirstEvent[0], c.LastEvent[len(c.LastEvent)-1])
		}
	}
}

// A moment is the state a Summarizer fed every event up to it reports,
// whichever resume state it was rebuilt from.
func TestMoment(t *testing.T) {
	tr, _ := synthetic(t, 60_000)
	if len(tr.cps) < 3 {
		t.Fatalf("%d resume states for %d events every %d", len(tr.cps), tr.Events(), tr.every)
	}
	for _, at := range []int64{0, tr.every - 1, tr.every, 2*tr.every + 17, tr.sum.Peaks.Allocated.Event, tr.Events() - 1} {
		s := analysis.NewSummarizer(analysis.Options{})
		for i := int64(0); i <= at; i++ {
			ev := tr.evs[i].full(0, i)
			s.Event(&ev)
		}
		want := s.State()
		if got := tr.stateAt(at); !reflect.DeepEqual(got, want) {
			t.Fatalf("state at %d differs from a fresh analysis", at)
		}
		m := tr.Moment(0, at)
		if m.Levels != want.Levels || len(m.Segments) != len(want.Segments) {
			t.Fatalf("moment at %d: levels %+v, %d segments; want %+v, %d", at, m.Levels, len(m.Segments), want.Levels, len(want.Segments))
		}
		if m.Sites.Bytes != want.Levels.Allocated {
			t.Errorf("moment at %d: icicle holds %d bytes, allocated %d", at, m.Sites.Bytes, want.Levels.Allocated)
		}
		for j := 1; j < len(m.Largest); j++ {
			if m.Largest[j].Size > m.Largest[j-1].Size {
				t.Fatalf("moment at %d: largest blocks out of order", at)
			}
		}
	}
	// At the allocated peak the biggest block's lifetime runs to its free.
	m := tr.Moment(0, tr.sum.Peaks.Allocated.Event)
	b := m.Largest[0]
	var free int64 = -1
	for i := tr.sum.Peaks.Allocated.Event + 1; i < tr.Events(); i++ {
		if e := &tr.evs[i]; e.kind == trace.KindFreeRequested && fmtAddr(e.addr) == b.Addr {
			free = i
			break
		}
	}
	if free < 0 || b.Lifetime != free-b.AllocEv {
		t.Errorf("largest block %s allocated at %d: lifetime %d, freed at %d", b.Addr, b.AllocEv, b.Lifetime, free)
	}
	if !strings.HasPrefix(b.Site, "model.py:") || !strings.HasSuffix(b.Site, " layer via x.py:1 inner") {
		t.Errorf("site %q", b.Site)
	}
}
