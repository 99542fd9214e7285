package plots_test

import (
	"io"
	"testing"

	"gonum.org/v1/plot"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/analysis/analysistest"
	"github.com/tracer-dev/tracer/plots"
)

// BenchmarkDraw draws each chart of a 10M-event summary to PNG in memory:
// the reduced timeline makes the cost independent of the trace length.
func BenchmarkDraw(b *testing.B) {
	s := analysis.NewSummarizer(analysis.Options{Stacks: fakeStacks})
	analysistest.Training(5, 10_000_000, s.Event)
	sum := s.Finalize()
	for _, bc := range []struct {
		name string
		fn   func(*analysis.Summary, plots.Options) (*plot.Plot, error)
	}{
		{"peak", plots.Peak},
		{"fragmentation", plots.Fragmentation},
		{"segments", plots.Segments},
		{"compare3", func(sum *analysis.Summary, opt plots.Options) (*plot.Plot, error) {
			return plots.Compare([]plots.Run{{"a", sum}, {"b", sum}, {"c", sum}}, opt)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				p, err := bc.fn(sum, plots.Options{})
				if err != nil {
					b.Fatal(err)
				}
				w, err := p.WriterTo(plots.Width, plots.Height, "png")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := w.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
