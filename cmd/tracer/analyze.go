package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/internal/pipeline"
)

type analyzeOptions struct {
	Path     string
	Paths    []string // several traces: a table by rank (see infoOptions)
	several  bool
	JSON     bool
	Top      int
	Timeline bool
	Conf     string
	Round    int64
	Limit    string
	Full     bool
	Out, Err io.Writer
}

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newAnalyzeCmd(nil) })
}

func newAnalyzeCmd(runF func(context.Context, *analyzeOptions) error) *cobra.Command {
	opts := &analyzeOptions{}
	cmd := &cobra.Command{
		Use:   "analyze [TRACE... | DIR] [--top N] [--json]",
		Short: "Peaks, fragmentation, and who was live at the peak",
		Long: `Analyze summarizes a trace: the peaks of allocated, reserved, active and
requested bytes with when they happened; fragmentation (internal: rounding;
external: reserved but unallocated; GMLake's 1 − peak active / peak reserved;
the largest free block against the largest request that failed or grew the
pool; all defined in the analysis package documentation); the allocation
sites live at the allocated peak, grouped by stack; the phases (the
record_function scopes the snapshot recorded, such as forward, backward or
Optimizer.step#Adam.step): per phase its peak, what it allocated and how much
of the allocated peak it holds; allocation lifetimes; the segment layout at the
reserved peak; and every OOM with the cache state.

With --conf, --round or --limit the trace is first replayed under those
settings and the replay is analyzed. Without TRACE, the built-in sample is used.

Several traces (the ranks of a distributed run), or a folder of them, give a
table by rank (as tracer info prints it), then the analysis of the rank whose
reserved peak is highest; --json holds every rank's.

` + sizeRule,
		Example: `  tracer analyze run.arrows
  tracer analyze run.arrows --top 20
  tracer analyze run.arrows --full-stacks     # every frame of each site, whole paths
  tracer analyze run.arrows --conf expandable_segments:True
  tracer analyze run.arrows --json | jq .fragmentation
  tracer analyze run.arrows --json | jq '.devices[0].phases'
  tracer analyze traces/ --limit 20GiB            # every rank under a limit`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths, several, err := pipeline.Paths(args)
			if err != nil {
				return err
			}
			if opts.Paths, opts.several = paths, several; !several && len(paths) == 1 {
				opts.Path = paths[0]
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
	f.StringVar(&opts.Limit, "limit", "", `replay first under this memory limit (e.g. 24GiB; "none" removes the recorded one)`)
	f.BoolVar(&opts.Full, "full-stacks", false, "list every frame of each site's stack, with whole paths, instead of a clipped line")
	return cmd
}

// fullStackFrames is the frames a site keeps with --full-stacks: any real
// stack's all.
const fullStackFrames = 1 << 16

// analysisOptions are the summary's options the flags ask for.
func (o *analyzeOptions) analysisOptions() analysis.Options {
	a := analysis.Options{TopSites: o.Top}
	if o.Full {
		a.SiteFrames = fullStackFrames
	}
	return a
}

// summarize analyzes the input as recorded, or a replay of it when any
// setting is given.
func summarize(ctx context.Context, in *pipeline.Input, conf string, round int64, limit string, aopt analysis.Options) ([]*analysis.Summary, string, error) {
	if conf == "" && round == 0 && limit == "" {
		sums, _, err := pipeline.Analyze(ctx, in, aopt)
		for _, s := range sums {
			s.MemoryLimit = analysis.Bytes(in.Meta.MemoryLimit)
		}
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
	for _, s := range run.Summaries {
		s.MemoryLimit = analysis.Bytes(r.Limit)
	}
	return run.Summaries, "replayed: " + r.Label, nil
}

func runAnalyze(ctx context.Context, opts *analyzeOptions) error {
	if opts.several {
		return runAnalyzeRanks(ctx, opts)
	}
	in, err := pipeline.Open(opts.Path)
	if err != nil {
		return err
	}
	in.Warn = warnTo(opts.Err)
	if in.Sample && !opts.JSON {
		fmt.Fprintf(opts.Err, "analyzing the built-in sample trace: %s\n", in.Name)
	}
	sums, how, err := summarize(ctx, in, opts.Conf, opts.Round, opts.Limit, opts.analysisOptions())
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
		if err := analysis.WriteTextOptions(opts.Out, s, analysis.TextOptions{Top: opts.Top, FullStacks: opts.Full}); err != nil {
			return err
		}
	}
	return nil
}
