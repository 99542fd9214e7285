// Package plots draws an analysis.Summary with gonum/plot: the memory
// timeline around the peak (Peak), fragmentation over time (Fragmentation,
// FragmentationRatio), several runs on one chart (Compare) and the segment
// layout at the reserved peak (Segments). Every chart has a title, units
// chosen by magnitude (MiB or GiB), a legend and time in seconds from the
// first event (or the event index for untimed traces). Lines come from the
// Summary's bounded timeline as min/max envelopes, so no peak is lost and
// drawing costs the same for any trace length.
package plots

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgpdf"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/internal/outfile"
)

// Options tune a chart; the zero value is good.
type Options struct {
	// Title replaces the default title.
	Title string
	// Sites is how many allocation sites live at the peak Peak names
	// (default 3; negative for none).
	Sites int
	// Segments bounds the bars of Segments (default 64, the largest).
	Segments int
	// ByEvent puts the event index on the x axis instead of time: better
	// for traces with long idle stretches (start-up, data loading), where
	// time squeezes the activity into a sliver.
	ByEvent bool
}

// Width and Height are the image size Save writes: 960×540 pixels in PNG.
const (
	Width  = 10 * vg.Inch
	Height = 5.625 * vg.Inch
)

// Save writes p to path in the format its extension names (.png, .svg,
// .pdf, also .jpg, .eps, .tif) at Width×Height.
func Save(p *plot.Plot, path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".png", ".svg", ".pdf", ".jpg", ".jpeg", ".eps", ".tif", ".tiff":
	default:
		return fmt.Errorf("plots: cannot tell the image format of %q: use .png, .svg or .pdf", path)
	}
	wt, err := render(p, ext[1:])
	if err != nil {
		return fmt.Errorf("plots: save %s: %w", path, err)
	}
	// Through a file with no name that takes path's at the end: a full
	// disk or a signal leaves no partial image (internal/outfile).
	out, err := outfile.Create(path)
	if err != nil {
		return fmt.Errorf("plots: save %s: %w", path, err)
	}
	if _, err = wt.WriteTo(out.File()); err == nil {
		err = out.Commit()
	}
	if err != nil {
		out.Abort()
		return fmt.Errorf("plots: save %s: %w", path, err)
	}
	return nil
}

// render draws p at Width×Height in format. An SVG embeds its fonts, so a
// viewer without Liberation Sans does not fall back to a wider font that
// runs off the box drawn for the text, and keeps its spaces (svgCanvas); a
// PDF's text is written in the code
// page its embedded fonts use (cp1252canvas).
func render(p *plot.Plot, format string) (io.WriterTo, error) {
	switch format {
	case "svg":
		c := vgsvg.NewWith(vgsvg.UseWH(Width, Height), vgsvg.EmbedFonts(true))
		p.Draw(draw.New(svgCanvas{c}))
		return c, nil
	case "pdf":
		c := vgpdf.New(Width, Height)
		p.Draw(draw.New(cp1252canvas{c}))
		return c, nil
	}
	return p.WriterTo(Width, Height, format)
}

// cp1252canvas is a PDF canvas that writes text in code page 1252, the
// encoding gonum's PDF backend embeds fonts with; it passes UTF-8 through
// as is, so "…" or "µ" came out as "â€¦" or "Âµ". Runes outside the code
// page are written as ".".
type cp1252canvas struct{ *vgpdf.Canvas }

// FillString implements vg.Canvas.
func (c cp1252canvas) FillString(f font.Face, pt vg.Point, s string) {
	c.Canvas.FillString(f, pt, toCP1252(s))
}

// svgCanvas is an SVG canvas whose text keeps runs of spaces, which
// aligns columns in text boxes: SVG collapses them, so each space after
// another is written as a no-break space, as wide in the font.
type svgCanvas struct{ *vgsvg.Canvas }

// FillString implements vg.Canvas.
func (c svgCanvas) FillString(f font.Face, pt vg.Point, s string) {
	if strings.Contains(s, "  ") || strings.HasPrefix(s, " ") {
		b := []rune(s)
		for i := range b {
			if b[i] == ' ' && (i == 0 || b[i-1] == ' ' || b[i-1] == '\u00a0') {
				b[i] = '\u00a0'
			}
		}
		s = string(b)
	}
	c.Canvas.FillString(f, pt, s)
}

// cp1252high are the runes of code page 1252's bytes 0x80 to 0x9F (0 where
// a byte is unused); 0xA0 to 0xFF are Latin-1's.
var cp1252high = [32]rune{
	'€', 0, '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 0, 'Ž', 0,
	0, '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 0, 'ž', 'Ÿ',
}

// toCP1252 encodes s in code page 1252, a rune outside it as ".".
func toCP1252(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r < 0x80 || r >= 0xA0 && r <= 0xFF:
			b = append(b, byte(r))
		default:
			c := byte('.')
			for i, h := range cp1252high {
				if h == r && h != 0 {
					c = byte(0x80 + i)
				}
			}
			b = append(b, c)
		}
	}
	return string(b)
}

// Okabe–Ito colours: distinct for colour-blind readers and in grey print.
var (
	blue      = color.RGBA{0x00, 0x72, 0xB2, 0xff}
	vermilion = color.RGBA{0xD5, 0x5E, 0x00, 0xff}
	green     = color.RGBA{0x00, 0x9E, 0x73, 0xff}
	purple    = color.RGBA{0xCC, 0x79, 0xA7, 0xff}
	orange    = color.RGBA{0xE6, 0x9F, 0x00, 0xff}
	sky       = color.RGBA{0x56, 0xB4, 0xE9, 0xff}
	yellow    = color.RGBA{0xF0, 0xE4, 0x42, 0xff}
	grey      = color.RGBA{0x99, 0x99, 0x99, 0xff}
	black     = color.RGBA{0x00, 0x00, 0x00, 0xff}
)

// palette colours runs of Compare in order.
var palette = []color.Color{vermilion, blue, green, purple, orange, sky, black, yellow}

// newPlot returns a plot with the house look: title, grid, legend top left.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.X.Tick.Marker = niceTicks{}
	p.Y.Tick.Marker = niceTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = -vg.Points(4)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	sans(p)
	return p
}

// envelope draws one timeline series as a line through the minima and
// maxima of its columns.
func envelope(tl *analysis.Timeline, s analysis.Series, scale float64, c color.Color, width vg.Length, dashes ...vg.Length) (*line, error) {
	return newLine(envelopeXYs(tl, s, scale), c, width, dashes...), nil
}

// headroom sets the y range to [0, top] plus room above for lines of
// legend or boxed text (about 12 pt each of a data area about 380 pt high)
// and for the peak labels under them (about 30 pt).
func headroom(p *plot.Plot, top float64, lines int) {
	frac := min(0.6, (float64(lines)*12+42)/380)
	p.Y.Min = 0
	p.Y.Max = top / (1 - frac)
	if p.Y.Max == 0 {
		p.Y.Max = 1
	}
}

// noThumb is a legend entry without a symbol, for text lines.
type noThumb struct{}

func (noThumb) Thumbnail(*draw.Canvas) {}

// timeline checks sum has something to draw and returns its timeline with
// the x axis opt asks for.
func timeline(sum *analysis.Summary, opt Options) (*analysis.Timeline, error) {
	if sum == nil || len(sum.Timeline.Buckets) == 0 {
		return nil, fmt.Errorf("plots: the summary has no events to draw")
	}
	tl := sum.Timeline // a shallow copy: the buckets are shared, not copied
	if opt.ByEvent {
		tl.HasTime = false
	}
	tl.TimeUnit = timeUnit(tl.SpanUs())
	return &tl, nil
}

// timeUnit is the unit of a time axis that spans spanUs: seconds from 1 s,
// milliseconds from 1 ms, else microseconds.
func timeUnit(spanUs int64) string {
	switch {
	case spanUs >= 1e6:
		return "s"
	case spanUs >= 1e3:
		return "ms"
	}
	return "µs"
}

// peakX is the x coordinate of a peak on tl.
func peakX(tl *analysis.Timeline, p analysis.Peak) float64 { return tl.X(p.Event, p.TimeUs) }
