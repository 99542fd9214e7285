package plots

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tracer-dev/tracer/analysis"
)

// oomMarks draws each out-of-memory error of a run as a dashed vertical
// line at its moment, up to a cross where reserved memory stood when the
// request failed (not higher: the legend is above).
type oomMarks struct {
	tl    *analysis.Timeline
	ooms  []analysis.OOM
	scale float64
	line  draw.LineStyle
	cross draw.GlyphStyle
}

// markOOMs marks sum's OOMs on p in colour c, y scaled by div, and returns
// the marks (nil when there are none) for a legend entry.
func markOOMs(p *plot.Plot, sum *analysis.Summary, tl *analysis.Timeline, div float64, c color.Color) *oomMarks {
	if len(sum.OOMs) == 0 {
		return nil
	}
	m := &oomMarks{tl: tl, ooms: sum.OOMs, scale: div,
		line:  draw.LineStyle{Color: c, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(3), vg.Points(2)}},
		cross: draw.GlyphStyle{Shape: thickCross{}, Radius: vg.Points(4), Color: c}}
	p.Add(m)
	return m
}

// oomLabel describes the OOMs of sum in a legend entry: how many, the
// first one's request and moment, and the verdict (analysis.OOMCause):
// the limit, or fragmentation.
func oomLabel(sum *analysis.Summary, tl *analysis.Timeline) string {
	n := sum.Stats["num_ooms"]
	o := sum.OOMs[0]
	first := "first"
	if n == 1 {
		first = "request"
	}
	causes := map[analysis.OOMCause]int{}
	for _, o := range sum.OOMs {
		causes[o.Cause]++
	}
	why := string(o.Cause)
	if len(causes) > 1 {
		why = fmt.Sprintf("%d %s, %d %s", causes[analysis.CauseLimit], analysis.CauseLimit,
			causes[analysis.CauseFragmentation], analysis.CauseFragmentation)
	}
	return fmt.Sprintf("out of memory: %d (%s %s at %s; %s)", n, first, o.Request,
		xText(tl, analysis.Peak{Event: o.Event, TimeUs: o.TimeUs}), why)
}

// Plot implements plot.Plotter.
func (m *oomMarks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, o := range m.ooms {
		x := trX(m.tl.X(o.Event, o.TimeUs))
		if x < c.Min.X || x > c.Max.X {
			continue
		}
		y := min(trY(float64(o.Reserved)/m.scale), c.Max.Y)
		c.StrokeLine2(m.line, x, c.Min.Y, x, y)
		c.DrawGlyph(m.cross, vg.Point{X: x, Y: y})
	}
}

// Thumbnail implements plot.Thumbnailer: the dashed line and its cross.
func (m *oomMarks) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(m.line, c.Min.X, y, c.Max.X, y)
	c.DrawGlyph(m.cross, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: y})
}

// thickCross is an ✕ drawn with strokes twice gonum's default width, to
// read over the lines under it.
type thickCross struct{}

// DrawGlyph implements draw.GlyphDrawer.
func (thickCross) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	ls := draw.LineStyle{Color: sty.Color, Width: vg.Points(1.6)}
	r := sty.Radius
	c.StrokeLine2(ls, pt.X-r, pt.Y-r, pt.X+r, pt.Y+r)
	c.StrokeLine2(ls, pt.X-r, pt.Y+r, pt.X+r, pt.Y-r)
}
