package plots

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/tracer-dev/tracer/analysis"
)

// Fragmentation draws the fragmentation measures in bytes over time:
// external (reserved − allocated) as a band, inactive split bytes (free
// space beside live blocks) and internal (active − requested) as lines,
// with reserved as a thin grey reference. A box gives the summary figures.
func Fragmentation(sum *analysis.Summary, opt Options) (*plot.Plot, error) {
	tl, err := timeline(sum, opt)
	if err != nil {
		return nil, err
	}
	f := sum.Fragmentation
	top := sum.Peaks.Reserved.Bytes
	div, unit := analysis.Unit(int64(top))
	title := opt.Title
	if title == "" {
		title = fmt.Sprintf("Fragmentation: %s reserved but unused at the reserved peak (%.1f%%)",
			f.ExternalAtReservedPeak, 100*f.ExternalRatio)
	}
	p := newPlot(title, tl.XLabel(), "memory ("+unit+")")
	phases := markPhases(p, sum, tl)
	res, err := envelope(tl, analysis.Reserved, div, grey, vg.Points(0.8))
	if err != nil {
		return nil, err
	}
	ext := newBand(tl, analysis.External, div, vermilion)
	split, err := maxLine(tl, analysis.InactiveSplit, div, orange, vg.Points(1.2))
	if err != nil {
		return nil, err
	}
	internal, err := maxLine(tl, analysis.Internal, div, blue, vg.Points(1.2), vg.Points(3), vg.Points(2))
	if err != nil {
		return nil, err
	}
	p.Add(res, ext, split, internal)
	p.Legend.Add("reserved", res)
	p.Legend.Add("external: reserved - allocated (min to max)", ext)
	p.Legend.Add("inactive split: free beside live blocks (max)", split)
	p.Legend.Add("internal: active - requested, rounding (max)", internal)
	legend := 4 + phases.legend(p)
	if m := markOOMs(p, sum, tl, div, black); m != nil {
		p.Legend.Add(oomLabel(sum, tl), m)
		legend++
	}

	lines := []string{
		fmt.Sprintf("GMLake 1 - peak active / peak reserved: %.1f%%", 100*f.GMLake),
		fmt.Sprintf("max external %s, max inactive split %s", f.ExternalMax.Bytes, f.InactiveSplitMax.Bytes),
		fmt.Sprintf("internal at the allocated peak %s", f.InternalAtPeak),
	}
	if g := sum.Grow; g != nil {
		lines = append(lines, fmt.Sprintf("largest grow: %s request, largest free block %s", g.BlockSize, g.LargestFree))
	}
	box := newTextBox(lines, vg.Points(9))
	box.FracX, box.FracY = 1, 1
	box.XAlign, box.YAlign = -1, -1
	box.Offset = vg.Point{X: -vg.Points(6), Y: -vg.Points(6)}
	p.Add(box)
	headroom(p, float64(top)/div, max(legend, len(lines)))
	p.X.Min = 0
	return p, nil
}

// FragmentationRatio draws external fragmentation as a share of reserved
// memory over time, (reserved − allocated) / reserved, in percent.
func FragmentationRatio(sum *analysis.Summary, opt Options) (*plot.Plot, error) {
	tl, err := timeline(sum, opt)
	if err != nil {
		return nil, err
	}
	title := opt.Title
	if title == "" {
		title = fmt.Sprintf("External fragmentation: share of reserved memory not allocated (%.1f%% at the reserved peak)",
			100*sum.Fragmentation.ExternalRatio)
	}
	p := newPlot(title, tl.XLabel(), "reserved - allocated (% of reserved)")
	b := newBand(tl, analysis.ExternalRatio, 0.01, vermilion)
	p.Add(b)
	p.Legend.Add("external / reserved (min to max)", b)
	ref, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 100 * sum.Fragmentation.GMLake}, {X: xmax(tl), Y: 100 * sum.Fragmentation.GMLake}})
	if err != nil {
		return nil, err
	}
	ref.Color, ref.Dashes = green, []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(ref)
	p.Legend.Add(fmt.Sprintf("GMLake 1 - peak active / peak reserved (%.1f%%)", 100*sum.Fragmentation.GMLake), ref)
	headroom(p, 100, 2)
	p.X.Min = 0
	return p, nil
}
