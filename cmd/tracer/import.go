package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/record"
)

type importOptions struct {
	Inputs   []string
	Out      string
	Fraction float64
	Total    string
	Device   string
	Rank     int
	Stdout   io.Writer
	Stderr   io.Writer
	Progress bool
	// OOMEmpties: the program calls torch.cuda.empty_cache() when it
	// catches an OOM (record.ImportOptions.EmptyCacheAfterOOM).
	OOMEmpties bool
}

func newImportCmd(runF func(context.Context, *importOptions) error) *cobra.Command {
	opts := &importOptions{}
	cmd := &cobra.Command{
		Use:   "import SNAPSHOT...|DIR [-o OUT]",
		Short: "Convert PyTorch memory snapshots into tracer traces",
		Long: `Import converts snapshots written by torch.cuda.memory._dump_snapshot (pickle,
protocols 2-5), the JSON form MemoryViz accepts, and bare segment lists
(torch.cuda.memory_snapshot()) into Arrow traces.

When PyTorch's history ring buffer wrapped (max_entries was reached), the trace
starts mid-run; import rebuilds the allocator state at the first event from the
snapshot's final segments and stores it as leading "reconstructed" events, so a
replay ends in exactly the dumped layout.

Import fills each alloc's and free's block size, which PyTorch does not record,
by replaying the recording on the allocator model under its own settings. If
the model cannot reproduce it (settings or a PyTorch version the model does not
know, or a --fraction that lets a recorded out-of-memory succeed), a warning
says at which event it left the recording: block sizes stay unknown from
there on, and everything else is imported as recorded.

The same replay decides which of the recorded segment releases were the
program's torch.cuda.empty_cache() calls, which PyTorch does not record, and
stores each as an "empty_cache" event before the releases it caused: a replay
under other settings then makes the calls the program made. Snapshots do not
store the per-process memory limit either: give it with --fraction and
--total-memory, or later to tracer replay --limit, which checks it against the
recording. A call that released nothing leaves no trace at all: such is the
empty_cache() with which a program that catches an OOM often goes on, right
after the OOM's own flush. Say the program does so with --oom-empties-cache:
import then adds the call after every OOM the program survived, where the
recording allows it.

Several files (one per rank) import in parallel; a directory stands for every
snapshot in it (recognised by content: other files are skipped), and -o is
then a directory. Each trace records its distributed rank, read from the file
name (rank3, rank_3, rank-3, snapshot_3.pickle) or given with --rank for one
snapshot: tracer info, analyze and replay of several traces print a table by
rank.

Each output is written to a file with no name that takes the output's name at
the end: a failed or interrupted import leaves nothing behind. An output that
is one of the inputs, or that two inputs would share, is refused. "-o -"
writes the trace to standard output; a device or FIFO is written to, never
replaced.
Decoded events wait in an unlinked scratch file beside the output (56 bytes per
trace entry: the disk there needs the room), so memory stays small: a 9 MB
snapshot imports in about 14 MiB. Snapshots over 64 MB are decoded in memory on
4 cores or more, several times faster, in about 1.5 times the file's size.

` + sizeRule,
		Example: `  tracer import snapshot.pickle                 # writes snapshot.arrows
  tracer import snapshot.pickle -o run.arrows
  tracer import rank*.pickle -o traces/          # one trace per rank
  tracer import snapshots/ -o traces/            # every snapshot in the folder
  tracer import mem.pickle --rank 3              # a rank the file name does not say
  tracer import oom.pickle --fraction 0.03 --total-memory 85017493504
  # a loop that catches torch.OutOfMemoryError, empties the cache, retries smaller
  tracer import retry.pickle --fraction 0.03 --total-memory 80GiB --oom-empties-cache`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Inputs, opts.Stdout, opts.Stderr = args, cmd.OutOrStdout(), cmd.ErrOrStderr()
			if cmd.Flags().Changed("rank") && opts.Rank < 0 {
				return usagef("--rank %d: want a rank ≥ 0", opts.Rank)
			}
			if !cmd.Flags().Changed("rank") {
				opts.Rank = analysis.NoRank
			}
			if opts.Fraction < 0 || opts.Fraction > 1 {
				return usagef("--fraction %g: must be in [0, 1]", opts.Fraction)
			}
			if runF == nil {
				runF = runImport
			}
			return runF(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "output", "o", "", "output trace (one input; - for stdout) or directory (several); default: beside each input, .arrows")
	cmd.Flags().Float64Var(&opts.Fraction, "fraction", 0, "the run's torch.cuda.set_per_process_memory_fraction, which snapshots do not record")
	cmd.Flags().StringVar(&opts.Total, "total-memory", "", "the GPU's total memory (e.g. 80GiB), needed with --fraction")
	cmd.Flags().StringVar(&opts.Device, "device-name", "", "the GPU's name, for the record")
	cmd.Flags().IntVar(&opts.Rank, "rank", 0, "the snapshot's distributed rank, when its file name does not say (rank3, _3.pickle)")
	cmd.Flags().BoolVar(&opts.Progress, "progress", isTerminal(os.Stderr), "print a line per imported file on stderr")
	cmd.Flags().BoolVar(&opts.OOMEmpties, "oom-empties-cache", false, "the program calls torch.cuda.empty_cache() when it catches an OOM (snapshots do not show a call that released nothing)")
	return cmd
}

func runImport(ctx context.Context, opts *importOptions) error {
	var total int64
	if opts.Total != "" {
		var err error
		if total, err = parseBytes(opts.Total); err != nil {
			return usagef("--total-memory: %v", err)
		}
	}
	if opts.Fraction > 0 && total == 0 {
		return usagef("--fraction needs --total-memory (the limit is fraction × total)")
	}
	ro := record.ImportOptions{Out: opts.Out, MemoryFraction: opts.Fraction, DeviceTotal: total, DeviceName: opts.Device,
		Rank: analysis.RankOf, EmptyCacheAfterOOM: opts.OOMEmpties}
	if opts.Rank != analysis.NoRank {
		ro.Rank = func(string) (int, bool) { return opts.Rank, true }
	}
	ins, notes, err := expandDirs(opts.Inputs, &ro)
	if err != nil {
		return err
	}
	if opts.Rank != analysis.NoRank && len(ins) != 1 {
		return usagef("--rank %d: %d snapshots would share it; several files take their ranks from their names", opts.Rank, len(ins))
	}
	if opts.Progress {
		ro.Progress = opts.Stderr
	}
	results, err := record.ImportSnapshots(ctx, ins, ro)
	if err == nil {
		for _, n := range notes {
			fmt.Fprintln(opts.Stderr, n)
		}
	}
	for _, r := range results {
		if r == nil {
			continue
		}
		note := ""
		if r.Truncated {
			note = fmt.Sprintf(", history wrapped: %d reconstructed events restore the state at its start", r.Reconstructed)
		}
		say := opts.Stdout
		if r.Out == outfile.Stdout {
			say = opts.Stderr // the trace itself goes to stdout
		}
		fmt.Fprintf(say, "%s: %d events, %d device(s)%s\n", r.Out, r.Events, r.Devices, note)
		for name, n := range r.Skipped {
			fmt.Fprintf(opts.Stderr, "warning: %s: skipped %d events with unknown action %q\n", r.In, n, name)
		}
		for _, p := range r.Problems {
			fmt.Fprintf(opts.Stderr, "warning: %s: %s\n", r.In, p)
		}
		for _, d := range r.Diverged {
			fmt.Fprintf(opts.Stderr, "warning: %s: %s\n", r.In, d)
		}
		for _, w := range r.Warnings {
			fmt.Fprintf(opts.Stderr, "warning: %s: %s\n", r.In, w)
		}
	}
	return err
}

// expandDirs replaces each directory among ins by the snapshots in it,
// with a note of the files skipped; with a directory, -o is one too.
func expandDirs(ins []string, ro *record.ImportOptions) (out, notes []string, err error) {
	for _, in := range ins {
		if st, err := os.Stat(in); err != nil || !st.IsDir() {
			out = append(out, in)
			continue
		}
		snaps, skipped, err := record.SnapshotsIn(in)
		if err != nil {
			return nil, nil, err
		}
		if len(skipped) > 0 {
			notes = append(notes, fmt.Sprintf("%s: %s; skipped %s (%s)", in, plural(len(snaps), "snapshot"), plural(len(skipped), "other file"), clipList(skipped, 3)))
		}
		out = append(out, snaps...)
		ro.OutDir = ro.Out != ""
	}
	return out, notes, nil
}

// clipList joins the first n names, saying how many more there are.
func clipList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
