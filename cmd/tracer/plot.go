package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/plots"
	"github.com/tracer-dev/tracer/replay"
	"gonum.org/v1/plot"
)

type plotOptions struct {
	Out    string
	Traces []string
	Kind   string
	Confs  []string
	Rounds []int64
	Limit  string
	Title  string
	X      string
	Stdout io.Writer
	Err    io.Writer
}

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newPlotCmd(nil) })
}

func newPlotCmd(runF func(context.Context, *plotOptions) error) *cobra.Command {
	opts := &plotOptions{}
	cmd := &cobra.Command{
		Use:   "plot OUT [TRACE...] [--kind peak|fragmentation|compare|segments]",
		Short: "Draw memory over time, fragmentation, comparisons or the segment layout",
		Long: `Plot draws a picture of a trace into OUT; the format follows the extension
(.png, .svg, .pdf).

  peak           allocated, reserved, active and requested bytes over time, the
                 peak marked, the biggest allocation sites live at it named
  fragmentation  the fragmentation measures over time
  compare        one line of reserved bytes per run: each TRACE as recorded, plus
                 a replay of the first TRACE per --conf and per --round given
                 (with neither: expandable_segments:True and --round 4096)
  segments       the segments at the reserved peak: allocated, free-but-split and
                 free bytes

Time is from the first event, in s, ms or µs by the trace's length (event
index when the trace has no times). Long traces are reduced per pixel column
keeping minima and maxima, so a peak is never lost. OOMs are marked (a dashed
line up to a cross where reserved stood); the longest phases (record_function
scopes) are shaded behind the lines. Without TRACE the built-in sample is
drawn.

` + sizeRule,
		Example: `  tracer plot peak.png run.arrows
  tracer plot frag.svg run.arrows --kind fragmentation
  tracer plot compare.png run.arrows --kind compare --conf expandable_segments:True --round 4096
  tracer plot compare.png a.arrows b.arrows --kind compare
  tracer plot segments.pdf run.arrows --kind segments
  tracer plot peak.png                    # the built-in sample`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Out, opts.Traces = args[0], args[1:]
			opts.Stdout, opts.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if opts.X != "auto" && opts.X != "time" && opts.X != "event" {
				return usagef("--x %q: want auto, time or event", opts.X)
			}
			switch opts.Kind {
			case "peak", "fragmentation", "compare", "segments":
			default:
				return usagef("--kind %q: want peak, fragmentation, compare or segments", opts.Kind)
			}
			if !isImage(opts.Out) {
				for _, tr := range opts.Traces {
					if isImage(tr) {
						return usagef("plot takes the image first, then the traces: tracer plot %s %s", tr, opts.Out)
					}
				}
				if strings.EqualFold(filepath.Ext(opts.Out), ".arrows") {
					return usagef("%s is a trace: plot takes the image to write first, as in: tracer plot peak.png %s", opts.Out, strings.Join(args, " "))
				}
				return usagef("%s: the output's extension picks the format: .png, .svg or .pdf", opts.Out)
			}
			if runF == nil {
				runF = runPlot
			}
			return runF(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Kind, "kind", "peak", "peak, fragmentation, compare or segments")
	f.StringArrayVar(&opts.Confs, "conf", nil, "PYTORCH_CUDA_ALLOC_CONF to replay under (compare: one line each; others: replay first)")
	f.Int64SliceVar(&opts.Rounds, "round", nil, "rounding quantum to replay with (compare: one line each)")
	f.StringVar(&opts.Limit, "limit", "", "memory limit for the replays (e.g. 24GiB)")
	f.StringVar(&opts.Title, "title", "", "title instead of the default")
	f.StringVar(&opts.X, "x", "auto", "x axis: time, event (index), or auto (event when idle time dominates)")
	return cmd
}

func runPlot(ctx context.Context, opts *plotOptions) error {
	if err := outfile.Check(opts.Out, opts.Traces...); err != nil {
		return err
	}
	paths := opts.Traces
	if len(paths) == 0 {
		paths = []string{""}
	}
	inputs := make([]*pipeline.Input, len(paths))
	for i, p := range paths {
		in, err := pipeline.Open(p)
		if err != nil {
			return err
		}
		in.Warn = warnTo(opts.Err)
		inputs[i] = in
		if in.Sample {
			fmt.Fprintf(opts.Err, "plotting the built-in sample trace: %s\n", in.Name)
		}
	}
	popt := plots.Options{Title: opts.Title}
	var p *plot.Plot
	var err error
	if opts.Kind == "compare" {
		p, err = comparePlot(ctx, opts, inputs, popt)
	} else {
		conf, round := "", int64(0)
		if len(opts.Confs) > 0 {
			conf = opts.Confs[0]
		}
		if len(opts.Rounds) > 0 {
			round = opts.Rounds[0]
		}
		var sums []*analysis.Summary
		sums, _, err = summarize(ctx, inputs[0], conf, round, opts.Limit, analysis.Options{})
		if err != nil {
			return err
		}
		if len(sums) == 0 {
			return fmt.Errorf("%s: no events to plot", inputs[0].Name)
		}
		popt.ByEvent = opts.X == "event" || opts.X == "auto" && plots.IdleDominated(sums[0])
		switch opts.Kind {
		case "peak":
			p, err = plots.Peak(sums[0], popt)
		case "fragmentation":
			p, err = plots.Fragmentation(sums[0], popt)
		case "segments":
			p, err = plots.Segments(sums[0], popt)
		}
	}
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := plots.Save(p, opts.Out); err != nil {
		return err
	}
	fmt.Fprintf(opts.Stdout, "wrote %s\n", opts.Out)
	return nil
}

// comparePlot draws one line per trace as recorded and one per replay of the
// first trace under each --conf and --round.
func comparePlot(ctx context.Context, opts *plotOptions, inputs []*pipeline.Input, popt plots.Options) (*plot.Plot, error) {
	confs, rounds := opts.Confs, opts.Rounds
	if len(inputs) == 1 && len(confs) == 0 && len(rounds) == 0 {
		confs, rounds = []string{"expandable_segments:True"}, []int64{4096}
	}
	var runs []plots.Run
	for _, in := range inputs {
		sums, _, err := pipeline.Analyze(ctx, in, analysis.Options{})
		if err != nil {
			return nil, err
		}
		if len(sums) > 0 {
			base, err := in.RecordedSettings()
			if err != nil {
				return nil, err
			}
			runs = append(runs, plots.Run{Label: "recorded (" + base.Label + ")", Summary: sums[0]})
		}
	}
	var settings []pipeline.Settings
	for _, c := range confs {
		s, err := parseSettings(c, 0, opts.Limit)
		if err != nil {
			return nil, err
		}
		settings = append(settings, s)
	}
	for _, r := range rounds {
		s, err := parseSettings("", r, opts.Limit)
		if err != nil {
			return nil, err
		}
		settings = append(settings, s)
	}
	// The replays run one after another and only their summaries are kept:
	// one Replayer serves them all, reusing its memory.
	var rp replay.Replayer
	for _, s := range settings {
		r, err := inputs[0].Resolve(s)
		if err != nil {
			return nil, err
		}
		run, err := pipeline.Replay(ctx, inputs[0], r, pipeline.Options{Replayer: &rp})
		if err != nil {
			return nil, err
		}
		if len(run.Summaries) > 0 {
			runs = append(runs, plots.Run{Label: r.Label, Summary: run.Summaries[0]})
		}
	}
	if len(runs) > 0 {
		popt.ByEvent = opts.X == "event" || opts.X == "auto" && plots.IdleDominated(runs[0].Summary)
	}
	return plots.Compare(runs, popt)
}

// isImage reports whether path's extension is one plot writes.
func isImage(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg", ".pdf":
		return true
	}
	return false
}
