package plots

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tracer-dev/tracer/analysis"
)

// band draws one timeline series as the area between its per-bucket minimum
// and maximum, with a line along the maximum. A bucket holds many events in
// a long trace; a line through its min and max alone would alias into a
// solid smear, while the band shows the range and the line the peaks.
type band struct {
	tl    *analysis.Timeline
	s     analysis.Series
	scale float64
	Fill  color.Color
	Line  draw.LineStyle
}

func newBand(tl *analysis.Timeline, s analysis.Series, scale float64, c color.Color) *band {
	// An opaque tint rather than a translucent fill: the columns overlap a
	// little to leave no antialiasing seams, and overlaps must not darken.
	r, g, b, _ := c.RGBA()
	tint := func(v uint32) uint8 { return uint8(0xff - (0xff-v>>8)*5/16) }
	return &band{tl: tl, s: s, scale: scale,
		Fill: color.RGBA{tint(r), tint(g), tint(b), 0xff},
		Line: draw.LineStyle{Color: c, Width: vg.Points(1)}}
}

// Columns is how many x columns a series is reduced to before drawing:
// about 1.5 pixels each in a 960-pixel-wide PNG. A bucket narrower than a
// pixel would draw a spike thinner than the antialiasing can show, and the
// peak would vanish from the picture though it is in the data.
const Columns = 600

// column is a run of timeline buckets merged for drawing.
type column struct {
	x0, x1     float64 // x extent: first and last event
	minX, maxX float64 // where the min and the max happened
	min, max   float64
	last       float64 // the value after the last event, held until the next column
}

// columns merges tl's buckets for series s into at most n columns of equal
// x width, keeping each column's min and max (and where they happened).
//
// It also returns the column width: a gap between columns wider than that
// is an idle stretch, drawn flat at the earlier column's last value.
func columns(tl *analysis.Timeline, s analysis.Series, scale float64, n int) ([]column, float64) {
	if len(tl.Buckets) == 0 {
		return nil, 0
	}
	first, last := &tl.Buckets[0], &tl.Buckets[len(tl.Buckets)-1]
	xmin, xmax := tl.X(first.FirstEvent, first.FirstTimeUs), tl.X(last.LastEvent, last.LastTimeUs)
	w := (xmax - xmin) / float64(n)
	out := make([]column, 0, min(n, len(tl.Buckets)))
	cur := -1
	for i := range tl.Buckets {
		k := &tl.Buckets[i]
		sp := &k.Series[s]
		x0, x1 := tl.X(k.FirstEvent, k.FirstTimeUs), tl.X(k.LastEvent, k.LastTimeUs)
		c := column{x0: x0, x1: x1,
			minX: tl.X(sp.Min.Event, sp.Min.TimeUs), min: sp.Min.Value / scale,
			maxX: tl.X(sp.Max.Event, sp.Max.TimeUs), max: sp.Max.Value / scale,
			last: sp.Last / scale}
		col := 0
		if w > 0 {
			col = int((x0 - xmin) / w)
		}
		if len(out) > 0 && col == cur {
			o := &out[len(out)-1]
			o.x1, o.last = x1, c.last
			if c.min < o.min {
				o.min, o.minX = c.min, c.minX
			}
			if c.max > o.max {
				o.max, o.maxX = c.max, c.maxX
			}
			continue
		}
		out = append(out, c)
		cur = col
	}
	return out, w
}

// edges returns the upper edge (max) left to right and the lower edge
// (min), as steps: each column spans its events, and between columns (an
// idle stretch of the trace) both edges hold the column's last value.
func (b *band) edges() (hi, lo plotter.XYs) {
	cols, w := columns(b.tl, b.s, b.scale, Columns)
	hi = make(plotter.XYs, 0, 4*len(cols))
	lo = make(plotter.XYs, 0, 4*len(cols))
	for i, c := range cols {
		hi = append(hi, plotter.XY{X: c.x0, Y: c.max}, plotter.XY{X: c.x1, Y: c.max})
		lo = append(lo, plotter.XY{X: c.x0, Y: c.min}, plotter.XY{X: c.x1, Y: c.min})
		if i+1 < len(cols) && cols[i+1].x0-c.x1 > w {
			hi = append(hi, plotter.XY{X: c.x1, Y: c.last}, plotter.XY{X: cols[i+1].x0, Y: c.last})
			lo = append(lo, plotter.XY{X: c.x1, Y: c.last}, plotter.XY{X: cols[i+1].x0, Y: c.last})
		}
	}
	return hi, lo
}

// envelopeXYs returns a series as a line through each column's min and max
// in the order they happened.
func envelopeXYs(tl *analysis.Timeline, s analysis.Series, scale float64) plotter.XYs {
	cols, w := columns(tl, s, scale, Columns)
	xys := make(plotter.XYs, 0, 4*len(cols))
	for i, c := range cols {
		a, b := plotter.XY{X: c.minX, Y: c.min}, plotter.XY{X: c.maxX, Y: c.max}
		if b.X < a.X {
			a, b = b, a
		}
		// Values hold until they change: steps, not slopes, between points.
		if n := len(xys); n > 0 {
			xys = append(xys, plotter.XY{X: a.X, Y: xys[n-1].Y})
		}
		xys = append(xys, a, plotter.XY{X: b.X, Y: a.Y}, b)
		if i+1 < len(cols) && cols[i+1].x0-c.x1 > w {
			xys = append(xys, plotter.XY{X: c.x1, Y: b.Y}, plotter.XY{X: c.x1, Y: c.last})
		}
	}
	return xys
}

// Plot implements plot.Plotter. Each column is filled as its own
// rectangle and the line is stroked in short pieces: freetype's rasterizer
// slows down quadratically with the edges of one path on a scanline, and a
// single 1200-vertex zigzag took seconds where pieces take milliseconds.
func (b *band) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	hi, lo := b.edges()
	if b.Fill != nil {
		for i := 0; i+1 < len(hi); i += 2 {
			x0, x1 := trX(hi[i].X), trX(hi[i+1].X)
			y0, y1 := trY(lo[i].Y), trY(hi[i].Y)
			x1 = max(x1, x0+vg.Points(0.5)) + vg.Points(0.4) // overlap the next column: no seam
			rect := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
			c.FillPolygon(b.Fill, c.ClipPolygonXY(rect))
		}
	}
	strokePieces(c, b.Line, transform(hi, trX, trY))
}

// transform maps data points to canvas points.
func transform(xys plotter.XYs, trX, trY func(float64) vg.Length) []vg.Point {
	pts := make([]vg.Point, len(xys))
	for i, q := range xys {
		pts[i] = vg.Point{X: trX(q.X), Y: trY(q.Y)}
	}
	return pts
}

// pieceLen is the most vertices stroked in one path; see band.Plot.
const pieceLen = 48

// strokePieces strokes a polyline clipped to c, in pieces that share their
// end points so the line stays continuous.
func strokePieces(c draw.Canvas, sty draw.LineStyle, pts []vg.Point) {
	for _, line := range c.ClipLinesXY(pts) {
		for i := 0; i < len(line)-1; i += pieceLen - 1 {
			c.StrokeLines(sty, line[i:min(i+pieceLen, len(line))])
		}
	}
}

// line is a polyline plotter drawn with strokePieces, for long envelopes.
type line struct {
	xys plotter.XYs
	plotter.Line
}

func newLine(xys plotter.XYs, c color.Color, width vg.Length, dashes ...vg.Length) *line {
	l := &line{xys: xys}
	l.Line.LineStyle = draw.LineStyle{Color: c, Width: width, Dashes: dashes}
	return l
}

// Plot implements plot.Plotter.
func (l *line) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	strokePieces(c, l.LineStyle, transform(l.xys, trX, trY))
}

// DataRange implements plot.DataRanger.
func (l *line) DataRange() (xmin, xmax, ymin, ymax float64) { return plotter.XYRange(l.xys) }

// DataRange implements plot.DataRanger.
func (b *band) DataRange() (xmin, xmax, ymin, ymax float64) {
	hi, lo := b.edges()
	xmin, xmax, _, ymax = plotter.XYRange(hi)
	_, _, ymin, _ = plotter.XYRange(lo)
	return xmin, xmax, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer: a filled square with the line.
func (b *band) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(b.Fill, pts)
	c.StrokeLine2(b.Line, c.Min.X, c.Max.Y, c.Max.X, c.Max.Y)
}

// maxLine draws a series' per-bucket maximum as a step line: for series
// drawn over a band, where their minimum would only add clutter.
func maxLine(tl *analysis.Timeline, s analysis.Series, scale float64, c color.Color, width vg.Length, dashes ...vg.Length) (*line, error) {
	hi, _ := (&band{tl: tl, s: s, scale: scale}).edges()
	return newLine(hi, c, width, dashes...), nil
}
