package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/trace"
)

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "tracer",
		Short: "See, replay and tune PyTorch's CUDA caching allocator",
		Long: `tracer records GPU allocation events, stores them as Apache Arrow traces, replays
them on an exact model of PyTorch's CUDA caching allocator with other settings,
and reports peak memory and fragmentation.

Without a TRACE argument, replay, analyze, plot and tune use a sample trace built
into the binary (a real 6-layer MLP training run on an H100), so you can try
them now.`,
		Example: `  # What would my run reserve with a 4 KiB rounding quantum, or expandable segments?
  tracer replay --round 4096
  tracer replay --conf expandable_segments:True run.arrows

  # Turn a PyTorch snapshot (torch.cuda.memory._dump_snapshot) into a trace
  tracer import snapshot.pickle -o run.arrows
  tracer info run.arrows

  # Which PYTORCH_CUDA_ALLOC_CONF to use, and the smallest GPU the run fits
  tracer tune run.arrows
  tracer tune run.arrows --objective fit --limit 24GiB

  # Who was live at the peak, and a picture of it
  tracer analyze run.arrows
  tracer plot peak.png run.arrows

  # Explore it in the browser: timeline, segments and sites at any moment
  tracer view run.arrows

  # Record a PyTorch program, unchanged
  tracer record -o train.arrows -- python train.py

  # SQL: a Parquet table DuckDB reads with nothing to install
  tracer export run.arrows -o run.parquet

  # Shell completion of commands, flags and their values
  source <(tracer completion bash)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       record.Version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newVersionCmd(nil),
		newImportCmd(nil),
	)
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	registerCompletions(root)
	return root
}

// extraCommands lets each command file register itself.
var extraCommands []func() *cobra.Command

// isCobraUsage recognises cobra's own argument errors (wrong number of
// arguments, unknown command), which are usage errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, s := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand", "invalid argument", "flag needs an argument"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func newVersionCmd(runF func(io.Writer) error) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tracer's version and the trace format it writes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.OutOrStdout())
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "tracer %s (trace format v%d, torch allocator model 2.11)\n", record.Version, trace.Current)
			return err
		},
	}
}
