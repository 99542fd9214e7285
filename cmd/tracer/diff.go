package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
)

type diffOptions struct {
	A, B     string
	Top      int
	JSON     bool
	Out, Err io.Writer
}

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newDiffCmd(nil) })
}

func newDiffCmd(runF func(context.Context, *diffOptions) error) *cobra.Command {
	opts := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff A B [--top N] [--json]",
		Short: "Compare two runs: peaks, counters, fragmentation, and which sites grew",
		Long: `Diff compares two traces, A then B: the torch.cuda.memory_stats() peaks and
counters (as tracer info computes them), fragmentation, and the memory each
allocation site held live at the allocated peak, sites sorted by how much
they grew or shrank. This is how a regression is found: the same program
before and after a PyTorch upgrade or a code change, or under two settings,
or two ranks of one distributed run.

Sites are matched by their stack frames, so a site whose line moved shows
as one that shrank and one that grew. Snapshots recorded without stacks
(context=None) hold every block under "(no stack)".

Traces with one device each are compared whatever the devices (rank 0 on
cuda:0 against rank 1 on cuda:1); others device by device.

With --json: {"a", "b", "devices": [{"device_a", "device_b", "stats":
[{"key", "a", "b", "change"}], "fragmentation_a", "fragmentation_b",
"sites": [{"site", "frames", "a_bytes", "b_bytes", "change_bytes",
"a_blocks", "b_blocks"}], "rest", "rest_sites", "unchanged_sites"}],
"unpaired_devices"}.`,
		Example: `  tracer diff before.arrows after.arrows
  tracer diff traces/run.rank0.arrows traces/run.rank1.arrows --top 20
  tracer diff before.arrows after.arrows --json | jq '.devices[0].sites[:3]'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("diff takes two traces, A and B (%d given): tracer diff before.arrows after.arrows", len(args))
			}
			if opts.Top < 0 {
				return usagef("--top %d: want a positive number", opts.Top)
			}
			opts.A, opts.B, opts.Out, opts.Err = args[0], args[1], cmd.OutOrStdout(), cmd.ErrOrStderr()
			if runF == nil {
				runF = runDiff
			}
			return runF(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Top, "top", 10, "sites to list, largest change first (0: all)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON instead of text")
	return cmd
}

// diffJSON is the --json contract of tracer diff. Add fields; never rename.
type diffJSON struct {
	A        string           `json:"a"`
	B        string           `json:"b"`
	Devices  []*analysis.Diff `json:"devices"`
	Unpaired []string         `json:"unpaired_devices"`
}

func runDiff(ctx context.Context, opts *diffOptions) error {
	paths := []string{opts.A, opts.B}
	sums := make([][]*analysis.Summary, 2)
	names := make([]string, 2)
	errw := &lockedWriter{w: opts.Err}
	err := pipeline.Each(ctx, 2, func(ctx context.Context, i int) error {
		in, run, _, err := infoOf(ctx, paths[i], analysis.Options{TopSites: -1}, warnTo(errw))
		if err != nil {
			return err
		}
		for _, d := range run.Result.Devices {
			if d.NumMismatches > 0 {
				fmt.Fprintf(errw, "warning: %s: device %d: the allocator model leaves the recording at %d events; alloc retries are the model's\n", in.Name, d.Device, d.NumMismatches)
			}
			for _, s := range run.Summaries {
				if s.Device == d.Device {
					// A trace does not show retries; the model under the
					// recorded settings counts them, as info does.
					s.Stats["num_alloc_retries"] = d.Stats.Map()["num_alloc_retries"]
				}
			}
		}
		sums[i], names[i] = run.Summaries, in.Name
		return nil
	})
	if err != nil {
		return err
	}
	pairs, unpaired := analysis.PairDevices(sums[0], sums[1])
	out := &diffJSON{A: names[0], B: names[1], Devices: []*analysis.Diff{}, Unpaired: unpaired}
	for _, p := range pairs {
		out.Devices = append(out.Devices, analysis.Compare(p[0], p[1], opts.Top))
	}
	if opts.JSON {
		return writeJSON(opts.Out, out)
	}
	for i, d := range out.Devices {
		if i > 0 {
			fmt.Fprintln(opts.Out)
		}
		if err := analysis.WriteDiff(opts.Out, d, names[0], names[1]); err != nil {
			return err
		}
	}
	if len(unpaired) > 0 {
		fmt.Fprintf(opts.Out, "not compared (no device of that ordinal in the other trace): %s\n", strings.Join(unpaired, ", "))
	}
	return nil
}
