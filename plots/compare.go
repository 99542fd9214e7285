package plots

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/tracer-dev/tracer/analysis"
)

// Run is one summary to compare, labelled with its settings, such as
// "recorded", "expandable_segments:True" or "--round 4096".
type Run struct {
	Label   string
	Summary *analysis.Summary
}

// Compare draws the reserved bytes of several runs on one chart, one line
// per run in the order given, with each run's peak in its legend entry;
// allocated bytes of the first run are drawn as a grey band for reference,
// since replays of one trace share them.
func Compare(runs []Run, opt Options) (*plot.Plot, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("plots: nothing to compare")
	}
	var top analysis.Bytes
	tls := make([]*analysis.Timeline, len(runs))
	for i, r := range runs {
		tl, err := timeline(r.Summary, opt)
		if err != nil {
			return nil, fmt.Errorf("plots: run %q: %w", r.Label, err)
		}
		tls[i] = tl
		top = max(top, r.Summary.Peaks.Reserved.Bytes)
	}
	for _, tl := range tls[1:] {
		tl.TimeUnit = tls[0].TimeUnit // one axis
	}
	div, unit := analysis.Unit(int64(top))
	title := opt.Title
	if title == "" {
		title = "Reserved memory by allocator setting"
	}
	first := tls[0]
	p := newPlot(title, first.XLabel(), "reserved memory ("+unit+")")
	phases := markPhases(p, runs[0].Summary, first) // replays keep the recorded phases
	ref := newBand(first, analysis.Allocated, div, grey)
	p.Add(ref)
	ooms := 0 // legend lines
	for i, r := range runs {
		c := palette[i%len(palette)]
		var dashes []vg.Length
		if i >= len(palette) {
			dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		// Earlier runs are drawn wider, so a later run on the same values
		// leaves them visible at its sides; a run identical to an earlier
		// one is dashed over it, and its legend says so.
		width := vg.Points(max(1, 3-0.5*float64(i)))
		label := fmt.Sprintf("%s: peak %s", r.Label, r.Summary.Peaks.Reserved.Bytes)
		if j := sameAs(tls, i); j >= 0 {
			dashes = []vg.Length{vg.Points(6), vg.Points(6)}
			width = vg.Points(2)
			label += ", the same as " + runs[j].Label
		}
		l, err := envelope(tls[i], analysis.Reserved, div, c, width, dashes...)
		if err != nil {
			return nil, err
		}
		p.Add(l)
		p.Legend.Add(label, l)
		if m := markOOMs(p, r.Summary, tls[i], div, c); m != nil {
			p.Legend.Add(r.Label+": "+oomLabel(r.Summary, tls[i]), m)
			ooms++
		}
	}
	p.Legend.Add(fmt.Sprintf("allocated, %s: peak %s", runs[0].Label, runs[0].Summary.Peaks.Allocated.Bytes), ref)
	headroom(p, float64(top)/div, len(runs)+1+ooms+phases.legend(p))
	p.X.Min = 0
	return p, nil
}

// sameAs returns the first run before i whose reserved line is the same
// as run i's (every bucket's extremes at the same x), or -1.
func sameAs(tls []*analysis.Timeline, i int) int {
	a := tls[i]
	for j, b := range tls[:i] {
		if len(a.Buckets) != len(b.Buckets) || a.HasTime != b.HasTime {
			continue
		}
		same := true
		for k := range a.Buckets {
			x, y := &a.Buckets[k], &b.Buckets[k]
			sx, sy := x.Series[analysis.Reserved], y.Series[analysis.Reserved]
			if sx.Min.Value != sy.Min.Value || sx.Max.Value != sy.Max.Value || sx.Last != sy.Last ||
				a.X(sx.Min.Event, sx.Min.TimeUs) != b.X(sy.Min.Event, sy.Min.TimeUs) ||
				a.X(sx.Max.Event, sx.Max.TimeUs) != b.X(sy.Max.Event, sy.Max.TimeUs) {
				same = false
				break
			}
		}
		if same {
			return j
		}
	}
	return -1
}
