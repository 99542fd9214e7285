package plots

import (
	"cmp"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tracer-dev/tracer/analysis"
)

// maxShaded bounds the phases shaded: the longest, so the legend stays short.
const maxShaded = 5

// phaseTints colour the shaded phases: light, opaque tints (overlapping
// spans must not darken), apart from the series' own colours.
var phaseTints = []color.Color{
	color.RGBA{0xfb, 0xe3, 0xb0, 0xff}, // orange
	color.RGBA{0xc6, 0xe9, 0xdc, 0xff}, // green
	color.RGBA{0xf1, 0xd4, 0xe4, 0xff}, // purple
	color.RGBA{0xd3, 0xea, 0xf8, 0xff}, // sky
	color.RGBA{0xe6, 0xe6, 0xe6, 0xff}, // grey
}

// phaseShade shades, behind the data, the stretches of the x axis where
// each of a few phases (record_function scopes) was the innermost scope.
type phaseShade struct {
	tl     *analysis.Timeline
	names  []string // shaded, in order of first appearance
	colors map[string]color.Color
}

// markPhases shades the longest phases of sum on p, under the plotters added
// after it, and returns the shade for its legend; nil when sum has none.
func markPhases(p *plot.Plot, sum *analysis.Summary, tl *analysis.Timeline) *phaseShade {
	var named []analysis.Phase
	for _, ph := range sum.Phases {
		if ph.Name != analysis.OutsidePhases && ph.Name != analysis.BeforeRecordingPhase && ph.Events > 0 {
			named = append(named, ph)
		}
	}
	if len(named) == 0 || len(tl.Phases) == 0 {
		return nil
	}
	longest := slices.Clone(named)
	slices.SortStableFunc(longest, func(a, b analysis.Phase) int {
		return cmp.Or(cmp.Compare(b.TimeUs, a.TimeUs), cmp.Compare(b.Events, a.Events))
	})
	keep := map[string]bool{}
	for _, ph := range longest[:min(maxShaded, len(longest))] {
		keep[ph.Name] = true
	}
	sh := &phaseShade{tl: tl, colors: map[string]color.Color{}}
	for _, ph := range named { // colours in order of first appearance
		if keep[ph.Name] {
			sh.colors[ph.Name] = phaseTints[len(sh.names)%len(phaseTints)]
			sh.names = append(sh.names, ph.Name)
		}
	}
	p.Add(sh, plotter.NewGrid()) // the grid again, over the shade
	return sh
}

// legend lists the shaded phases in p's legend and returns how many lines
// it added (0 for a nil shade).
func (s *phaseShade) legend(p *plot.Plot) int {
	if s == nil {
		return 0
	}
	for _, name := range s.names {
		label := name
		if r := []rune(label); len(r) > 48 {
			label = string(r[:47]) + "…"
		}
		p.Legend.Add("phase "+label, swatch{s.colors[name]})
	}
	return len(s.names)
}

// Plot implements plot.Plotter. A span runs from its first event to the
// next span's first, and is at least half a point wide, so a short phase
// is still seen.
func (s *phaseShade) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	spans := s.tl.Phases
	for i, sp := range spans {
		col, ok := s.colors[sp.Phase]
		if !ok {
			continue
		}
		x0 := trX(s.tl.X(sp.FirstEvent, sp.FirstTimeUs))
		x1 := trX(s.tl.X(sp.LastEvent, sp.LastTimeUs))
		if i+1 < len(spans) {
			x1 = trX(s.tl.X(spans[i+1].FirstEvent, spans[i+1].FirstTimeUs))
		}
		x0, x1 = max(x0, c.Min.X), min(max(x1, x0+vg.Points(0.5)), c.Max.X)
		if x1 <= x0 {
			continue
		}
		c.FillPolygon(col, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
	}
}

// swatch is a legend thumbnail filled with one colour.
type swatch struct{ c color.Color }

// Thumbnail implements plot.Thumbnailer.
func (w swatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(w.c, []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}})
}
