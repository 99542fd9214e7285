package plots

import (
	"cmp"
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/tracer-dev/tracer/analysis"
)

// Segments draws the segments when the reserved peak was fullest as stacked
// bars, largest first: allocated, pending free (freed on another stream,
// not yet reusable), free beside live blocks (split) and free in segments
// holding no block. At most opt.Segments (default 64) bars; the title says
// how many were left out.
func Segments(sum *analysis.Summary, opt Options) (*plot.Plot, error) {
	if sum == nil || len(sum.Segments) == 0 {
		return nil, fmt.Errorf("plots: the summary has no segments to draw")
	}
	segs := slices.Clone(sum.Segments)
	slices.SortStableFunc(segs, func(a, b analysis.SegmentLayout) int { return cmp.Compare(b.Size, a.Size) })
	n := opt.Segments
	if n <= 0 {
		n = 64
	}
	shown := segs[:min(n, len(segs))]
	div, unit := analysis.Unit(int64(shown[0].Size))

	title := opt.Title
	if title == "" {
		var split, free analysis.Bytes
		for _, g := range segs {
			split, free = split+g.SplitFree, free+g.Free
		}
		kind := "segments"
		if expandable(segs) {
			kind = "expandable segments"
		}
		title = fmt.Sprintf("%d %s at the reserved peak (%s): %s free beside blocks, %s in empty segments",
			len(segs), kind, sum.Peaks.Reserved.Bytes, split, free)
		if len(shown) < len(segs) {
			title = fmt.Sprintf("%d largest of ", len(shown)) + title
		}
	}
	p := newPlot(title, "segments, largest first", "segment size ("+unit+")")
	p.Title.TextStyle.Font.Size = vg.Points(12)

	parts := []struct {
		name string
		c    color.Color
		get  func(analysis.SegmentLayout) analysis.Bytes
	}{
		{"allocated", blue, func(g analysis.SegmentLayout) analysis.Bytes { return g.Allocated }},
		{"pending free (cross-stream)", sky, func(g analysis.SegmentLayout) analysis.Bytes { return g.PendingFree }},
		{"free beside live blocks (split)", orange, func(g analysis.SegmentLayout) analysis.Bytes { return g.SplitFree }},
		{"free, segment empty", grey, func(g analysis.SegmentLayout) analysis.Bytes { return g.Free }},
	}
	// Bars fill the data width: about 880 pt at the default size.
	width := vg.Points(min(24, 620/float64(len(shown))))
	var below *plotter.BarChart
	for _, part := range parts {
		vs := make(plotter.Values, len(shown))
		for i, g := range shown {
			vs[i] = float64(part.get(g)) / div
		}
		bc, err := plotter.NewBarChart(vs, width)
		if err != nil {
			return nil, fmt.Errorf("plots: segment bars: %w", err)
		}
		bc.Color = part.c
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(part.name, bc)
	}
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(8)
	p.X.Tick.Marker = segmentTicks{n: len(shown)}
	// Each bar in the middle of a slot of its own: with the axis ending at
	// the first and last bars' centres, those were cut in half (an
	// expandable trace has just two segments, its pools' ranges).
	p.X.Min, p.X.Max = -0.5, float64(len(shown))-0.5
	headroom(p, float64(shown[0].Size)/div, 4)
	return p, nil
}

// segmentTicks labels segment bars by rank, every few bars.
type segmentTicks struct{ n int }

// Ticks implements plot.Ticker.
func (t segmentTicks) Ticks(lo, hi float64) []plot.Tick {
	step := max(1, t.n/8)
	var ts []plot.Tick
	for i := 0; i < t.n; i++ {
		tk := plot.Tick{Value: float64(i)}
		if i%step == 0 {
			tk.Label = fmt.Sprintf("#%d", i+1)
		}
		ts = append(ts, tk)
	}
	return ts
}

// expandable reports whether every segment is an expandable one.
func expandable(segs []analysis.SegmentLayout) bool {
	for _, g := range segs {
		if !g.Expandable {
			return false
		}
	}
	return len(segs) > 0
}
