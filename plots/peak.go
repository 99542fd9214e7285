package plots

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tracer-dev/tracer/analysis"
)

// Peak draws allocated, reserved, active and requested bytes over time, marks
// the allocated and reserved peaks, and lists the largest allocation sites
// live at the allocated peak in a box at the top right.
func Peak(sum *analysis.Summary, opt Options) (*plot.Plot, error) {
	tl, err := timeline(sum, opt)
	if err != nil {
		return nil, err
	}
	top := max(sum.Peaks.Reserved.Bytes, sum.Peaks.Active.Bytes)
	div, unit := analysis.Unit(int64(top))
	title := opt.Title
	if title == "" {
		title = fmt.Sprintf("GPU memory: peak allocated %s, peak reserved %s",
			sum.Peaks.Allocated.Bytes, sum.Peaks.Reserved.Bytes)
	}
	p := newPlot(title, tl.XLabel(), "memory ("+unit+")")
	phases := markPhases(p, sum, tl)

	// Allocated is a band from each bucket's minimum to its maximum; active
	// and requested, close to it, are lines along their maxima; reserved,
	// which moves rarely, is a line through its minima and maxima.
	alloc := newBand(tl, analysis.Allocated, div, blue)
	req, err := maxLine(tl, analysis.Requested, div, purple, vg.Points(0.8))
	if err != nil {
		return nil, err
	}
	act, err := maxLine(tl, analysis.Active, div, green, vg.Points(0.8), vg.Points(3), vg.Points(2))
	if err != nil {
		return nil, err
	}
	res, err := envelope(tl, analysis.Reserved, div, vermilion, vg.Points(1.6))
	if err != nil {
		return nil, err
	}
	// Reserved first: where it dips (an empty_cache) an allocated spike at
	// the same moment must stay visible over it.
	p.Add(res, alloc, req, act)
	p.Legend.Add("reserved (segments)", res)
	p.Legend.Add("active max (allocated + pending free)", act)
	p.Legend.Add("allocated (min to max)", alloc)
	p.Legend.Add("requested max (before rounding)", req)
	legend := 4 + phases.legend(p)
	if m := markOOMs(p, sum, tl, div, black); m != nil {
		p.Legend.Add(oomLabel(sum, tl), m)
		legend++
	}

	for _, m := range []struct {
		pk analysis.Peak
		c  color.Color
	}{
		{sum.Peaks.Reserved, vermilion},
		{sum.Peaks.Allocated, blue},
	} {
		if err := markPeak(p, tl, m.pk, div, m.c); err != nil {
			return nil, err
		}
	}
	// The figures go in one box at the top right rather than beside the
	// peak marks, where they would collide when the peaks are close.
	box := infoBox(sum, tl, opt.Sites)
	p.Add(box)
	lines := max(legend, len(box.Lines))
	headroom(p, float64(top)/div, lines)
	p.X.Min = 0
	return p, nil
}

// markPeak puts a triangle on a peak.
func markPeak(p *plot.Plot, tl *analysis.Timeline, pk analysis.Peak, div float64, c color.Color) error {
	sc, err := plotter.NewScatter(plotter.XYs{{X: peakX(tl, pk), Y: float64(pk.Bytes) / div}})
	if err != nil {
		return err
	}
	sc.GlyphStyle = draw.GlyphStyle{Shape: draw.TriangleGlyph{}, Radius: vg.Points(4), Color: c}
	p.Add(sc)
	return nil
}

// xText formats a moment as the x axis does.
func xText(tl *analysis.Timeline, pk analysis.Peak) string {
	if tl.HasTime {
		return analysis.Duration(max(pk.TimeUs-tl.T0Us, 0))
	}
	return fmt.Sprintf("event %d", pk.Event)
}

// infoBox gives the peaks (marked by triangles) and the n (default 3)
// largest sites live at the allocated peak.
func infoBox(sum *analysis.Summary, tl *analysis.Timeline, n int) *textBox {
	lines := []string{
		fmt.Sprintf("▲ reserved peak %s at %s", sum.Peaks.Reserved.Bytes, xText(tl, sum.Peaks.Reserved)),
		fmt.Sprintf("▲ allocated peak %s at %s", sum.Peaks.Allocated.Bytes, xText(tl, sum.Peaks.Allocated)),
	}
	if n == 0 {
		n = 3
	}
	if n > 0 && len(sum.Sites) > 0 {
		lines = append(lines, "largest sites live at the allocated peak:")
		for i, s := range sum.Sites {
			if i == n {
				break
			}
			lines = append(lines, siteLine(s))
		}
	}
	b := newTextBox(lines, vg.Points(9))
	b.Colors = []color.Color{vermilion, blue} // as the triangles
	b.FracX, b.FracY = 1, 1
	b.XAlign, b.YAlign = draw.XRight, draw.YTop
	b.Offset = vg.Point{X: -vg.Points(6), Y: -vg.Points(6)}
	return b
}

// siteLine names a site as "836.6 MiB in 4 blocks  train.py:61 step via …".
func siteLine(s analysis.Site) string {
	name := s.Label()
	if r := []rune(name); len(r) > 70 {
		name = string(r[:69]) + "…"
	}
	return fmt.Sprintf("%9s in %3d blocks  %s", s.BlockBytes, s.Count, name)
}

// xmax is the largest x of the timeline.
func xmax(tl *analysis.Timeline) float64 {
	b := tl.Buckets[len(tl.Buckets)-1]
	return tl.X(b.LastEvent, b.LastTimeUs)
}
