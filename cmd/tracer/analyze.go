package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
)

type analyzeOptions struct {
	Path     string
	JSON     bool
	Top      int
	Timeline bool
	Conf     string
	Round    int64
	Limit    string
	Out, Err io.Writer
}

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newAnalyzeCmd(nil) })
}

func newAnalyzeCmd(runF func(context.Context, *analyzeOptions) error) *cobra.Command {
	opts := &analyzeOptions{}
	cmd := &cobra.Command{
		Use:   "analyze [TRACE] [--top N] [--json]",
		Short: "Peaks, fragmentation, and who was live at the peak",
		Long: `Analyze summarizes a trace: the peaks of allocated, reserved, active and
requested bytes with when they happened; fragmentation (internal: rounding;
external: reserved but unallocated; GMLake's 1 − peak active / peak reserved;
the largest free block against the largest request that failed or grew the
pool; all defined in the analysis package documentation); the allocation
sites live at the allocated peak, grouped by stack; allocation lifetimes; the
segment layout at the reserved peak; and every OOM with the cache state.

With --conf, --round or --limit the trace is first replayed under those
settings and the replay is analyzed. Without TRACE, the built-in sample is used.`,
		Example: `  tracer analyze run.arrows
  tracer analyze run.arrows --top 20
  tracer analyze run.arrows --conf expandable_segments:True
  tracer analyze run.arrows --json | jq .fragmentation`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Path = args[0]
			}
			opts.Out, opts.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if opts.Top < 0 {
				return usagef("--top %d: want a positive number", opts.Top)
			}
			if runF == nil {
				runF = runAnalyze
			}
			return runF(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Top, "top", 10, "allocation sites to list")
	f.BoolVar(&opts.JSON, "json", false, "print the summary as JSON (bytes as integers)")
	f.BoolVar(&opts.Timeline, "timeline", false, "with --json, include the reduced timeline")
	f.StringVar(&opts.Conf, "conf", "", "replay first under these PYTORCH_CUDA_ALLOC_CONF keys")
	f.Int64Var(&opts.Round, "round", 0, "replay first with this rounding quantum (bytes)")
	f.StringVar(&opts.Limit, "limit", "", "replay first under this memory limit (e.g. 24GiB)")
	return cmd
}

// summarize analyzes the input as recorded, or a replay of it when any
// setting is given.
func summarize(ctx context.Context, in *pipeline.Input, conf string, round int64, limit string, aopt analysis.Options) ([]*analysis.Summary, string, error) {
	if conf == "" && round == 0 && limit == "" {
		sums, _, err := pipeline.Analyze(ctx, in, aopt)
		return sums, "as recorded", err
	}
	s, err := parseSettings(conf, round, limit)
	if err != nil {
		return nil, "", err
	}
	r, err := in.Resolve(s)
	if err != nil {
		return nil, "", err
	}
	run, err := pipeline.Replay(ctx, in, r, pipeline.Options{Analysis: aopt})
	if err != nil {
		return nil, "", err
	}
	return run.Summaries, "replayed: " + r.Label, nil
}

func runAnalyze(ctx context.Context, opts *analyzeOptions) error {
	in, err := pipeline.Open(opts.Path)
	if err != nil {
		return err
	}
	in.Warn = warnTo(opts.Err)
	if in.Sample && !opts.JSON {
		fmt.Fprintf(opts.Err, "analyzing the built-in sample trace: %s\n", in.Name)
	}
	sums, how, err := summarize(ctx, in, opts.Conf, opts.Round, opts.Limit, analysis.Options{TopSites: opts.Top})
	if err != nil {
		return err
	}
	if opts.JSON {
		if !opts.Timeline {
			for _, s := range sums {
				s.Timeline = analysis.Timeline{}
			}
		}
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"trace": in.Name, "how": how, "devices": sums})
	}
	fmt.Fprintf(opts.Out, "%s (%s)\n", in.Name, how)
	for _, s := range sums {
		if err := analysis.WriteText(opts.Out, s, opts.Top); err != nil {
			return err
		}
	}
	return nil
}
