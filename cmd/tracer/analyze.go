package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/tune"
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
reserved peak; and every OOM with the cache state and its verdict: the limit
(the live blocks and the request exceed it) or fragmentation (they fit, but no
free block is large enough), the sites live then, and which settings avoid it
(from a replay under each setting alone).

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
	sums, how, _, err := summarizeRun(ctx, in, conf, round, limit, aopt)
	return sums, how, err
}

// summarizeRun is summarize, with the replay it analyzed (nil for none).
func summarizeRun(ctx context.Context, in *pipeline.Input, conf string, round int64, limit string, aopt analysis.Options) ([]*analysis.Summary, string, *pipeline.Run, error) {
	if conf == "" && round == 0 && limit == "" {
		sums, _, err := pipeline.Analyze(ctx, in, aopt)
		for _, s := range sums {
			s.MemoryLimit = analysis.Bytes(in.Meta.MemoryLimit)
		}
		return sums, "as recorded", nil, err
	}
	s, err := parseSettings(conf, round, limit)
	if err != nil {
		return nil, "", nil, err
	}
	r, err := in.Resolve(s)
	if err != nil {
		return nil, "", nil, err
	}
	run, err := pipeline.Replay(ctx, in, r, pipeline.Options{Analysis: aopt})
	if err != nil {
		return nil, "", nil, err
	}
	for _, s := range run.Summaries {
		s.MemoryLimit = analysis.Bytes(r.Limit)
	}
	return run.Summaries, "replayed: " + r.Label, run, nil
}

// avoidOOMs names, for each OOM of the summaries (of run, a replay, when
// not nil), up to three settings under which its request does not fail,
// from one tune pass: PyTorch's defaults and each knob alone, under the
// analyzed limit.
func avoidOOMs(ctx context.Context, in *pipeline.Input, limit string, sums []*analysis.Summary, run *pipeline.Run, progress io.Writer) error {
	n := 0
	for _, s := range sums {
		n += len(s.OOMs)
	}
	if n == 0 {
		return nil
	}
	s, err := parseSettings("", 0, limit)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "replaying under each setting alone, to find which avoid the %d OOMs\n", n)
	rep, err := tune.Search(ctx, in, tune.Options{Limit: s.Limit, Rounds: -1})
	if err != nil {
		return err
	}
	for _, sum := range sums {
		tune.FillAvoidedBy(rep, sum, run)
	}
	return nil
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
	sums, how, run, err := summarizeRun(ctx, in, opts.Conf, opts.Round, opts.Limit, opts.analysisOptions())
	if err != nil {
		return err
	}
	if err := avoidOOMs(ctx, in, opts.Limit, sums, run, opts.Err); err != nil {
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
