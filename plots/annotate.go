package plots

import (
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// sans switches every text of p to Liberation Sans, which reads better than
// gonum's default serif at small sizes. Per plot, not plot.DefaultFont: a
// library must not change a global its importer may rely on.
func sans(p *plot.Plot) {
	for _, f := range []*font.Font{
		&p.Title.TextStyle.Font,
		&p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font,
		&p.Legend.TextStyle.Font,
	} {
		f.Variant = "Sans"
	}
}

// textBox is a Plotter that writes lines of text on a white, outlined box,
// readable over the data. It is anchored to the data canvas by fractions of
// its width and height (0,0 bottom left; 1,1 top right), or at a data point
// when AtData is set.
type textBox struct {
	Lines   []string
	Colors  []color.Color // per line; missing or nil entries use Style.Color
	Style   text.Style
	FracX   float64 // anchor, as a fraction of the data area
	FracY   float64
	AtData  bool
	X, Y    float64         // data anchor when AtData
	XAlign  draw.XAlignment // how the box sits on its anchor
	YAlign  draw.YAlignment
	Offset  vg.Point
	Outline color.Color
}

func newTextBox(lines []string, size vg.Length) *textBox {
	sty := text.Style{Color: black, Font: font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size),
		Handler: plot.DefaultTextHandler}
	return &textBox{Lines: lines, Style: sty, Outline: grey}
}

// Plot implements plot.Plotter.
func (b *textBox) Plot(c draw.Canvas, p *plot.Plot) {
	txt := strings.Join(b.Lines, "\n")
	pad := vg.Points(4)
	w := b.Style.Width(txt) + 2*pad
	h := b.Style.Height(txt) + 2*pad
	var at vg.Point
	if b.AtData {
		trX, trY := p.Transforms(&c)
		at = vg.Point{X: trX(b.X), Y: trY(b.Y)}
	} else {
		at = vg.Point{X: c.Min.X + vg.Length(b.FracX)*(c.Max.X-c.Min.X), Y: c.Min.Y + vg.Length(b.FracY)*(c.Max.Y-c.Min.Y)}
	}
	at = at.Add(b.Offset)
	x0 := at.X + vg.Length(b.XAlign)*w
	y0 := at.Y + vg.Length(b.YAlign)*h
	// Keep the box on the canvas.
	x0 = max(c.Min.X, min(x0, c.Max.X-w))
	y0 = max(c.Min.Y, min(y0, c.Max.Y-h))
	rect := []vg.Point{{X: x0, Y: y0}, {X: x0 + w, Y: y0}, {X: x0 + w, Y: y0 + h}, {X: x0, Y: y0 + h}}
	c.FillPolygon(color.NRGBA{0xff, 0xff, 0xff, 0xe6}, rect)
	c.StrokeLines(draw.LineStyle{Color: b.Outline, Width: vg.Points(0.5)}, append(rect, rect[0]))
	sty := b.Style
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YTop
	lh := (h - 2*pad) / vg.Length(len(b.Lines))
	for i, l := range b.Lines {
		s := sty
		if i < len(b.Colors) && b.Colors[i] != nil {
			s.Color = b.Colors[i]
		}
		at := vg.Point{X: x0 + pad, Y: y0 + h - pad - vg.Length(i)*lh}
		if rest, ok := strings.CutPrefix(l, markPrefix); ok {
			// The mark is drawn, not written: a PDF's fonts (code page
			// 1252) have no ▲.
			w := s.Width(markPrefix)
			r := s.Font.Size * 0.32
			c.DrawGlyph(draw.GlyphStyle{Shape: draw.TriangleGlyph{}, Radius: r, Color: s.Color},
				vg.Point{X: at.X + r, Y: at.Y - lh*0.5})
			at.X += w
			l = rest
		}
		c.FillText(s, at, l)
	}
}

// markPrefix starts a textBox line that names a peak marked on the plot by
// a triangle; the box draws the triangle in the line's colour.
const markPrefix = "▲ "
