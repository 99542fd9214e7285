package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/record"
)

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newRecordCmd(nil) })
}

type recordOptions struct {
	Workload  string   // built-in name or file; "" = record.DefaultWorkload
	Device    string   // auto, cuda, sim
	GPU       int      // CUDA ordinal
	Out       string   // trace path
	List      bool     // --list-workloads
	Conf      string   // PYTORCH_CUDA_ALLOC_CONF
	ConfGiven bool     // --conf was on the command line (not from the environment)
	Limit     string   // --limit SIZE
	SimMemory string   // --sim-memory SIZE
	Command   []string // the program after --
	// Program mode only.
	MaxEntries int
	Stacks     string
	Progress   bool
	Stdin      io.Reader
	Stdout     io.Writer
	Stderr     io.Writer
}

func newRecordCmd(runF func(context.Context, *recordOptions) error) *cobra.Command {
	opts := &recordOptions{}
	cmd := &cobra.Command{
		Use:   "record [--workload NAME|FILE] [-o OUT] | record [-o OUT] -- PROGRAM ARGS...",
		Short: "Record allocator events live: a built-in workload, or a PyTorch program",
		Long: `Record writes a trace of GPU memory allocation events, in one of two ways.

With a workload (the default), tracer runs its own model of PyTorch's CUDA
caching allocator live, on the GPU (--device cuda: real cudaMalloc, real
addresses, NVML's used memory sampled along the run) or on a simulated device
(--device sim, anywhere), and records every event. Workloads are small text
files of alloc/free/repeat/empty_cache statements (see 'tracer record
--list-workloads' for the built-in ones, the experiments of the articles
tracer grew out of, and testdata/workloads/README.md for the format). Without
--device, tracer uses the GPU when there is one and says so.

With a program after --, tracer runs it unchanged with PyTorch's memory
history switched on from its start (a startup hook on PYTHONPATH), and when
it ends (normally, on an exception, on a CUDA OOM, on Ctrl-C or SIGTERM,
which tracer forwards) imports the snapshot it dumps. The program's output
and exit status pass through; tracer exits with the program's status (one
that never used CUDA, or had no torch, leaves no trace, which tracer says). A
second Ctrl-C or SIGTERM kills the program (SIGKILL: nothing is dumped), and
the program dies with tracer if tracer is killed. A snapshot that fails to
import is kept beside OUT (OUT's name, .snapshot-PID.pickle), and tracer
says so. Processes the program started that outlive it are named in a
warning: their history is not recorded.

A workload's trace grows in OUT.partial-*.arrows beside OUT (the name
without its extension, then .partial-, digits, the extension), written in
batches of at most 64K events and at least one a second, and takes OUT's
name when the recording ends, so that OUT is always whole: a recording
killed mid-run leaves that partial file, a trace readable up to its last
batch ('tracer info' says it was cut short). Ctrl-C or SIGTERM stops the
workload and keeps what it recorded at OUT (exit status 130 or 143).
A symbolic link at OUT is replaced, not written through.

` + sizeRule,
		Example: `  # The default workload, on the GPU if there is one, into trace.arrows
  tracer record

  # A built-in experiment on the simulated device
  tracer record --list-workloads
  tracer record --workload small-tensors --device sim -o small.arrows

  # Fragmentation OOM: 500 MB free in holes, 200 MB will not fit under the limit
  tracer record --workload fragment-10mb --device cuda --limit 1100MiB

  # Your own workload, with other allocator settings
  tracer record --workload my.workload --conf expandable_segments:True

  # A PyTorch program, unchanged (its flags are its own, after --)
  tracer record -o train.arrows -- python train.py --epochs 1
  tracer record --stacks all --max-entries 5000000 -- torchrun --nproc-per-node 2 train.py`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return usagef("unexpected argument %q: put the program after --, as in: tracer record -- python train.py", args[0])
			}
			if len(args) == 0 && cmd.ArgsLenAtDash() == 0 {
				return usagef("no program after --: tracer record -- python train.py records a program; without -- a workload")
			}
			opts.Command = args
			opts.ConfGiven = cmd.Flags().Changed("conf")
			if !opts.ConfGiven {
				opts.Conf = os.Getenv("PYTORCH_CUDA_ALLOC_CONF")
			}
			opts.Stdin, opts.Stdout, opts.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := checkRecordFlags(cmd, opts); err != nil {
				return err
			}
			if runF == nil {
				runF = runRecord
			}
			return runF(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Workload, "workload", "w", "", "built-in workload name or workload file (default "+record.DefaultWorkload+")")
	f.StringVar(&opts.Device, "device", record.DeviceAuto, "where memory comes from: cuda, sim, or auto (the GPU if there is one)")
	f.IntVar(&opts.GPU, "gpu", 0, "CUDA device ordinal for --device cuda")
	f.StringVarP(&opts.Out, "output", "o", "trace.arrows", "output trace (- for stdout)")
	f.BoolVar(&opts.List, "list-workloads", false, "list the built-in workloads and exit")
	f.StringVar(&opts.Conf, "conf", "", "allocator settings in PYTORCH_CUDA_ALLOC_CONF syntax (default: $PYTORCH_CUDA_ALLOC_CONF)")
	f.StringVar(&opts.Limit, "limit", "", "cap on reserved memory, e.g. 1100MiB (as set_per_process_memory_fraction)")
	f.StringVar(&opts.SimMemory, "sim-memory", "80GiB", "total memory of the simulated device")
	f.IntVar(&opts.MaxEntries, "max-entries", record.DefaultMaxEntries, "program mode: PyTorch's history ring-buffer size")
	f.StringVar(&opts.Stacks, "stacks", "python", "program mode: stacks to record: python, all (with C++) or none")
	f.BoolVar(&opts.Progress, "progress", isTerminal(os.Stderr), "show progress on stderr (default: when stderr is a terminal)")
	return cmd
}

// checkRecordFlags rejects flags that do not belong to the chosen mode.
func checkRecordFlags(cmd *cobra.Command, opts *recordOptions) error {
	f := cmd.Flags()
	if len(opts.Command) > 0 {
		for _, name := range []string{"workload", "device", "gpu", "limit", "sim-memory", "list-workloads"} {
			if f.Changed(name) {
				return usagef("--%s is for workloads; a program sets its own (remove it, or the program after --)", name)
			}
		}
	} else {
		for _, name := range []string{"max-entries", "stacks"} {
			if f.Changed(name) {
				return usagef("--%s applies to a program: tracer record --%s ... -- python train.py", name, name)
			}
		}
	}
	switch opts.Device {
	case record.DeviceAuto, record.DeviceCUDA, record.DeviceSim:
	default:
		return usagef("--device %q: want cuda, sim or auto", opts.Device)
	}
	if !oneOf(record.StackModes, opts.Stacks) {
		return usagef("--stacks %q: want python, all or none", opts.Stacks)
	}
	if opts.MaxEntries < 1 {
		return usagef("--max-entries %d: must be at least 1", opts.MaxEntries)
	}
	return nil
}

func oneOf(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func runRecord(ctx context.Context, opts *recordOptions) error {
	switch {
	case opts.List:
		for _, w := range record.Builtins() {
			fmt.Fprintf(opts.Stdout, "%-15s %s\n", w.Name, w.Description)
		}
		return nil
	case len(opts.Command) > 0:
		return runRecordProgram(ctx, opts)
	}
	name := opts.Workload
	if name == "" {
		name = record.DefaultWorkload
	}
	if _, ok := record.Builtin(name); !ok {
		if err := outfile.Check(opts.Out, name); err != nil {
			return err
		}
	}
	w, err := record.LoadWorkload(name)
	if err != nil {
		return err
	}
	conf, err := allocator.ParseConf(opts.Conf)
	if err == nil {
		err = conf.Modelled()
	}
	if err != nil {
		src := "--conf"
		if !opts.ConfGiven {
			src = "PYTORCH_CUDA_ALLOC_CONF"
		}
		return usagef("%s %s: %v", src, pipeline.Clip(opts.Conf), err)
	}
	var limit, simMem int64
	if opts.Limit != "" && opts.Limit != "none" {
		if limit, err = parseBytes(opts.Limit); err != nil {
			return usagef("--limit: %v", err)
		}
		if limit == 0 {
			return usagef("--limit %s: no allocation fits under a limit of 0 bytes; leave --limit out (or say none) for no limit", opts.Limit)
		}
	}
	if simMem, err = parseBytes(opts.SimMemory); err != nil {
		return usagef("--sim-memory: %v", err)
	}
	tg, err := record.OpenTarget(opts.Device, opts.GPU, simMem)
	if err != nil {
		return err
	}
	defer tg.Close()
	if opts.Device == record.DeviceAuto {
		where := fmt.Sprintf("GPU %d (%s)", opts.GPU, tg.Name)
		if tg.Kind == record.DeviceSim {
			where = fmt.Sprintf("the simulated device (%s)", tg.Fallback)
		}
		fmt.Fprintf(opts.Stderr, "tracer: recording %s on %s\n", w.Name, where)
	}
	ro := record.Options{Workload: w, Target: tg, Conf: conf, Limit: limit, Out: opts.Out}
	if opts.Progress {
		ro.Progress = opts.Stderr
	}
	res, err := record.Record(ctx, ro)
	if res != nil {
		st := res.Stats
		say := opts.Stdout
		if opts.Out == outfile.Stdout {
			say = opts.Stderr // the trace itself goes to stdout
		}
		fmt.Fprintf(say, "%s on %s: %d events in %v, peak reserved %s, peak allocated %s → %s\n",
			res.Workload, res.Device, res.Events, roundDuration(res.Elapsed), allocator.FormatSize(st.ReservedBytes[0].Peak),
			allocator.FormatSize(st.AllocatedBytes[0].Peak), res.Out)
		if res.SampleErr != nil {
			fmt.Fprintf(opts.Stderr, "warning: NVML sampling stopped early: %v\n", res.SampleErr)
		}
		var se *record.StatementError
		if errors.As(err, &se) && allocator.IsOOM(err) {
			return fmt.Errorf("%w (the trace ends with the oom event)", err)
		}
	}
	return err
}

func runRecordProgram(ctx context.Context, opts *recordOptions) error {
	// The program's own files (its script, what it reads) are inputs too.
	if err := outfile.Check(opts.Out, opts.Command...); err != nil {
		return err
	}
	// The program decides when it ends: tracer forwards it signals
	// (record.RecordProgram) and waits, rather than ending on its own.
	forwarding.Store(true)
	defer forwarding.Store(false)
	po := record.ProgramOptions{
		Args: opts.Command, Out: opts.Out, MaxEntries: opts.MaxEntries, Stacks: opts.Stacks,
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
	}
	if opts.ConfGiven {
		po.AllocConf = opts.Conf
	}
	res, err := record.RecordProgram(ctx, po)
	if res == nil {
		var pe *record.ProgramError
		if errors.As(err, &pe) && pe.Reason == "no-python" {
			return &exitError{code: 127, msg: pe.Msg}
		}
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(opts.Stderr, "warning: %s\n", w)
	}
	for _, t := range res.Traces {
		approx := ""
		if !t.Peak.Exact {
			approx = "~"
		}
		fmt.Fprintf(opts.Stderr, "tracer: %d events of pid %d (dumped at %s), peak reserved %s, peak allocated %s%s → %s\n",
			t.Events, t.PID, t.Reason, allocator.FormatSize(t.Peak.Reserved), approx, allocator.FormatSize(t.Peak.Allocated), t.Out)
	}
	code := res.ExitCode
	var pe *record.ProgramError
	switch {
	case err != nil && errors.As(err, &pe) && pe.NothingUsed():
		// The program ran and gave the allocator nothing to record: tracer
		// says so and exits as the program did.
		if code == 0 {
			fmt.Fprintf(opts.Stderr, "tracer: %v; no trace written\n", err)
			return nil
		}
		return &exitError{code: code, msg: err.Error() + "; no trace written"}
	case err != nil:
		// Not everything was recorded: say why, and fail even if the
		// program succeeded.
		return &exitError{code: max(code, 1), msg: err.Error()}
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// roundDuration keeps two or three significant digits: 1.2s, 35ms, 171µs.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
