package plots_test

import (
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/cmpimg"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/plots"
)

// Golden images, as gonum/plot tests its own: each Example writes
// testdata/NAME.png and CheckPlot compares it with NAME_golden.png.
// go test ./plots -regen rewrites the goldens; look at them before committing.

func TestPeak(t *testing.T)          { cmpimg.CheckPlot(ExamplePeak, t, "peak.png") }
func TestFragmentation(t *testing.T) { cmpimg.CheckPlot(ExampleFragmentation, t, "fragmentation.png") }
func TestFragmentationRatio(t *testing.T) {
	cmpimg.CheckPlot(ExampleFragmentationRatio, t, "fragmentation_ratio.png")
}
func TestSegments(t *testing.T) { cmpimg.CheckPlot(ExampleSegments, t, "segments.png") }
func TestPeak_mlpTrain(t *testing.T) {
	cmpimg.CheckPlot(ExamplePeak_mlpTrain, t, "peak_mlp_train.png")
}
func TestSegments_mlpTrain(t *testing.T) {
	cmpimg.CheckPlot(ExampleSegments_mlpTrain, t, "segments_mlp_train.png")
}
func TestSegments_expandable(t *testing.T) {
	cmpimg.CheckPlot(ExampleSegments_expandable, t, "segments_expandable.png")
}
func TestCompare_mlpTrain(t *testing.T) {
	cmpimg.CheckPlot(ExampleCompare_mlpTrain, t, "compare_mlp_train.png")
}
func TestCompare(t *testing.T)  { cmpimg.CheckPlot(ExampleCompare, t, "compare.png") }
func TestPeak_oom(t *testing.T) { cmpimg.CheckPlot(ExamplePeak_oom, t, "peak_oom.png") }
func TestCompare_oom(t *testing.T) {
	cmpimg.CheckPlot(ExampleCompare_oom, t, "compare_oom.png")
}

func TestSave_formats(t *testing.T) {
	p, err := plots.Peak(summary(), plots.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"a.png", "a.svg", "a.pdf", "A.PNG"} {
		if err := plots.Save(p, filepath.Join(dir, name)); err != nil {
			t.Errorf("Save(%s): %v", name, err)
		}
	}
	for _, name := range []string{"a.gif", "noext"} {
		err := plots.Save(p, filepath.Join(dir, name))
		if err == nil || !strings.Contains(err.Error(), "use .png, .svg or .pdf") {
			t.Errorf("Save(%s) = %v, want an error naming the formats", name, err)
		}
	}
}

func TestEmptySummary(t *testing.T) {
	sum := analysis.NewSummarizer(analysis.Options{}).Finalize()
	for name, fn := range map[string]func(*analysis.Summary, plots.Options) (*plot.Plot, error){
		"Peak": plots.Peak, "Fragmentation": plots.Fragmentation,
		"FragmentationRatio": plots.FragmentationRatio, "Segments": plots.Segments,
	} {
		if _, err := fn(sum, plots.Options{}); err == nil {
			t.Errorf("%s of an empty summary: no error", name)
		}
	}
	if _, err := plots.Compare(nil, plots.Options{}); err == nil {
		t.Error("Compare of no runs: no error")
	}
}
