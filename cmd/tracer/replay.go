package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/cuda"
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/trace"
)

type replayOptions struct {
	Path         string
	Paths        []string // several traces: a table by rank (see infoOptions)
	several      bool
	Conf         string
	FromDefaults bool
	Round        int64
	Limit        string
	Device       string
	Output       string
	JSON         bool
	Out          io.Writer
	Err          io.Writer
}

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newReplayCmd(nil) })
}

func newReplayCmd(runF func(context.Context, *replayOptions) error) *cobra.Command {
	opts := &replayOptions{}
	cmd := &cobra.Command{
		Use:   "replay [TRACE... | DIR] [--conf STR] [--round N] [--limit SIZE] [--device sim|cuda] [-o OUT.arrows] [--json]",
		Short: "Replay a trace on the caching-allocator model under other settings",
		Long: `Replay feeds the trace's requests (allocations with their streams, frees,
cross-stream frees, OOM attempts, the user's empty_cache calls, which tracer
import writes as empty_cache rows) to an exact model of PyTorch 2.11's CUDA
caching allocator, under the recorded settings overridden by the flags, and
prints the peaks, counters and fragmentation next to the recorded run's, for
each device. Under any settings the replay makes the same requests; the
recorded segment releases are outcomes only.

--conf takes PYTORCH_CUDA_ALLOC_CONF syntax and applies over the recorded string
(over PyTorch's defaults with --from-defaults, which drops the recorded keys it
does not name: the way to replay under exactly another run's settings).
KEY:none removes one recorded key (max_split_size_mb:none replays as if the
run had left max_split_size_mb at PyTorch's default); PyTorch has no such
value, which is tracer's.
It also takes the allocator's internal constants, in bytes, which PyTorch does
not expose: tracer_round (kMinBlockSize, 512; also --round), tracer_small_size
(1 MiB), tracer_small_segment (2 MiB), tracer_min_large_alloc (10 MiB) and
tracer_large_rounding (2 MiB); the large segment size is PyTorch's own
large_segment_size_mb (20). --limit is the per-process memory limit
(set_per_process_memory_fraction × total memory); "none" removes a recorded one.
A PyTorch snapshot does not store the run's limit: for a trace imported without
--fraction, a --limit under which the replay reproduces every recorded event is
taken as the run's (the recorded settings filled in, compared event by event,
"limit_filled_in" in --json); one under which it does not is replayed as another
setting, with a note saying so.
--device cuda replays on real GPU memory through the CUDA driver and reports the
latency of device calls and of the allocator's own work.

Several traces (the ranks of a distributed run), or a folder of them, are each
replayed under the same flags (over each one's recorded settings) and
summarised rank by rank: the recorded and replayed reserved peaks and OOMs, and
the rank that peaks highest in the replay (-o and --device cuda take one trace).

Without TRACE, the built-in sample trace is replayed.

` + sizeRule,
		Example: `  tracer replay --round 4096                       # the built-in sample, 4 KiB quantum
  tracer replay run.arrows --conf expandable_segments:True
  tracer replay run.arrows --from-defaults         # as if the run had set no PYTORCH_CUDA_ALLOC_CONF
  tracer replay run.arrows --conf max_split_size_mb:none   # one recorded key back to its default
  tracer replay run.arrows --conf max_split_size_mb:128,garbage_collection_threshold:0.8 --limit 20GiB
  tracer replay traces/ --conf expandable_segments:True   # every rank
  tracer replay run.arrows --round 512 -o replayed.arrows
  tracer replay run.arrows --conf tracer_small_size:262144,large_segment_size_mb:64
  tracer replay run.arrows --device cuda            # on the GPU, with latencies
  tracer replay run.arrows --json | jq .replayed
  tracer replay run.arrows --json | jq '.devices["1"].replayed'   # a second GPU
  tracer replay oom.arrows --limit 2550524805     # the run's limit, which snapshots do not store`,
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
			if opts.Device != "sim" && opts.Device != "cuda" {
				return usagef("--device %q: want sim or cuda", opts.Device)
			}
			if opts.Round < 0 || opts.Round&(opts.Round-1) != 0 {
				return usagef("--round %d: the rounding quantum must be a power of two (512 is PyTorch's)", opts.Round)
			}
			if runF == nil {
				runF = runReplay
			}
			return runF(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Conf, "conf", "", "PYTORCH_CUDA_ALLOC_CONF keys applied over the recorded settings")
	f.BoolVar(&opts.FromDefaults, "from-defaults", false, "apply --conf over PyTorch's defaults, dropping the recorded keys it does not name")
	f.Int64Var(&opts.Round, "round", 0, "rounding quantum in bytes, a power of two (PyTorch: 512)")
	f.StringVar(&opts.Limit, "limit", "", `per-process memory limit, e.g. 24GiB, 512MiB, bytes, or "none"`)
	f.StringVar(&opts.Device, "device", "sim", "sim (simulated device) or cuda (real GPU memory)")
	f.StringVarP(&opts.Output, "output", "o", "", "write the replayed events as a trace (- for stdout; the report then goes to stderr)")
	f.BoolVar(&opts.JSON, "json", false, "print JSON (a stable contract) instead of text")
	return cmd
}

func parseSettings(conf string, round int64, limit string) (pipeline.Settings, error) {
	s := pipeline.Settings{Conf: conf, Round: round}
	switch limit {
	case "":
	case "none":
		s.Limit = -1
	default:
		n, err := parseBytes(limit)
		if err != nil {
			return s, usagef("--limit: %v", err)
		}
		if n == 0 {
			return s, usagef("--limit %s: no allocation fits under a limit of 0 bytes; --limit none removes the recorded limit", limit)
		}
		s.Limit = n
	}
	return s, nil
}

// replayJSON is the --json contract of tracer replay. Add fields; never rename.
type replayJSON struct {
	Trace         string                            `json:"trace"`
	Rank          *int                              `json:"rank,omitempty"` // with several traces
	Settings      map[string]settingsJSON           `json:"settings"`
	Recorded      map[string]int64                  `json:"recorded"`
	Replayed      map[string]int64                  `json:"replayed"`
	Fragmentation map[string]analysis.Fragmentation `json:"fragmentation"`
	OOMs          []oomJSON                         `json:"ooms"`
	Mismatches    int                               `json:"model_mismatches"`
	// Reproduced: the replayed settings are the recorded ones (or fill in
	// a limit the trace does not know) and the replay reproduces every
	// recorded event.
	Reproduced bool `json:"reproduced"`
	// LimitFilledIn: --limit gave the limit the trace did not know, and
	// with it the replay reproduces the recording (the recorded settings
	// are reported with it); LimitNote says when it did not.
	LimitFilledIn bool        `json:"limit_filled_in,omitempty"`
	LimitNote     string      `json:"limit_note,omitempty"`
	Device        *deviceJSON `json:"device,omitempty"`
	// Devices holds the same per CUDA device, by ordinal; the top-level
	// recorded, replayed, fragmentation, ooms and model_mismatches are
	// device 0's (the first device's).
	Devices map[string]*replayDeviceJSON `json:"devices"`
}

// replayDeviceJSON is one device's part of replayJSON.
type replayDeviceJSON struct {
	Recorded      map[string]int64                  `json:"recorded"`
	Replayed      map[string]int64                  `json:"replayed"`
	Fragmentation map[string]analysis.Fragmentation `json:"fragmentation"`
	OOMs          []oomJSON                         `json:"ooms"`
	Mismatches    int                               `json:"model_mismatches"`
}

type settingsJSON struct {
	Conf       string `json:"conf"`
	Round      int64  `json:"round_bytes"`
	LimitBytes int64  `json:"limit_bytes"`
	Label      string `json:"label"`
}

type oomJSON struct {
	Seq        int64  `json:"seq"`
	Size       int64  `json:"size"`
	Stream     uint64 `json:"stream"`
	FreeCached int64  `json:"free_cached_bytes"`
	Recorded   bool   `json:"recorded"`
	Site       string `json:"site,omitempty"`
}

type deviceJSON struct {
	Name           string                 `json:"name"`
	Events         int64                  `json:"events"`
	WallSeconds    float64                `json:"wall_seconds"`
	DeviceSeconds  float64                `json:"device_call_seconds"`
	AllocatorNsPer float64                `json:"allocator_ns_per_event"`
	Calls          map[string]latencyJSON `json:"calls"`
	// OldCalls is Calls under the key of the first releases, a Go field
	// name; written for this version only.
	OldCalls map[string]latencyJSON `json:"Calls"`
}

type latencyJSON struct {
	Count  int64   `json:"count"`
	MeanUs float64 `json:"mean_us"`
	MaxUs  float64 `json:"max_us"`
}

func runReplay(ctx context.Context, opts *replayOptions) error {
	if opts.several {
		return runReplayRanks(ctx, opts)
	}
	// One pass (or two side by side) over the trace: its large arrays are
	// made once, and huge pages spare most of their first touch's faults.
	grow.UseHugePages(true)
	defer grow.UseHugePages(false)
	in, err := pipeline.Open(opts.Path)
	if err != nil {
		return err
	}
	in.Warn = warnTo(opts.Err)
	s, err := parseSettings(opts.Conf, opts.Round, opts.Limit)
	s.FromDefaults = opts.FromDefaults
	if err != nil {
		return err
	}
	want, err := in.Resolve(s)
	if err != nil {
		return err
	}
	base, err := in.RecordedSettings()
	if err != nil {
		return err
	}
	if in.Sample && !opts.JSON {
		fmt.Fprintf(opts.Err, "replaying the built-in sample trace: %s\n(pass a TRACE to replay your own; tracer import turns a PyTorch snapshot into one)\n", in.Name)
	}

	// The report prints no more of the summaries than their fragmentation.
	popts := pipeline.Options{Analysis: analysis.Options{FragmentationOnly: true}}
	var gpu *cuda.Device
	if opts.Device == "cuda" {
		if gpu, err = cuda.Open(0); err != nil {
			return err
		}
		defer gpu.Close()
		gpu.SetTiming(true)
		popts.NewDevice = func(d int32) allocator.Device { return gpu }
		want.Total = gpu.TotalBytes()
		// Real cudaMalloc addresses are not the recorded ones, and best fit
		// breaks ties by address: an event-by-event comparison with the
		// recording does not apply on a real device.
		want.Recorded = false
	}
	var w *trace.Writer
	if opts.Output != "" {
		if err := outfile.Check(opts.Output, opts.Path); err != nil {
			return err
		}
		if opts.Output == outfile.Stdout {
			opts.Out = opts.Err // the trace itself goes to stdout
		}
	}
	create := func() error {
		if opts.Output == "" {
			return nil
		}
		meta := in.Meta
		meta.Producer, meta.Source, meta.SourceFile = "tracer "+record.Version, trace.SourceReplay, in.Name
		// A wrapped trace's replay begins with its reconstructed events too
		// (replay reports them), so Truncated carries over; it has an
		// empty_cache row for every call the replay performed.
		meta.AllocConf, meta.MemoryLimit, meta.EmptyCacheRows = want.Conf.String(), want.Limit, true
		w, err = trace.Create(opts.Output, meta, trace.WriterOptions{})
		popts.Out = w
		return err
	}
	if err := create(); err != nil {
		return err
	}
	defer func() {
		if w != nil {
			w.Abort() // no-op after a successful Close
		}
	}()

	restart := func() error {
		w.Abort()
		return create()
	}
	if w == nil {
		restart = nil
	}
	out, _, got, wall, err := replayCompared(ctx, in, want, base, &popts, opts.Device == "cuda", restart)
	if err != nil {
		return err
	}
	if w != nil {
		if err := w.Close(); err != nil {
			return err
		}
	}
	if gpu != nil {
		out.Device = deviceReport(gpu, got.Facts.Events, wall)
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	writeReplay(opts.Out, in, out, got)
	if opts.Output != "" {
		fmt.Fprintf(opts.Out, "replayed events written to %s\n", opts.Output)
	}
	return nil
}

// replayCompared replays in under want and, for the recorded column,
// under its recorded settings base, and compares the two. onDevice: the
// replay runs on a real GPU (popts.NewDevice), where no event-by-event
// comparison applies. restart, when set, starts the output trace
// (popts.Out) again after a replay that turned out not to fill in the
// run's limit. rec is the replay under the recorded settings (got when
// they are the ones asked for); wall is how long the replay under want
// took.
func replayCompared(ctx context.Context, in *pipeline.Input, want, base pipeline.Resolved, popts *pipeline.Options, onDevice bool, restart func() error) (out *replayJSON, rec, got *pipeline.Run, wall time.Duration, err error) {
	// A limit for a trace that does not know the run's (a snapshot stores
	// none) may be the run's: replayed with the recording's addresses and
	// compared with it, it then reproduces the recording, and is the
	// recorded settings filled in. Otherwise it is another setting, replayed
	// as such.
	filled, fillTried := false, false
	var fillDiffers int
	start := time.Now()
	if want.FillsLimit && !onDevice {
		fillTried = true
		// The import decided the empty_cache calls without the limit, and
		// may have taken the releases of garbage collection or of a retry
		// under it for calls: the calls are inferred again under the limit,
		// and, should that not reproduce the recording, the import's rows
		// are tried as they are.
		for _, infer := range []bool{true, false} {
			try := want
			try.Recorded, try.InferEmptyCaches = true, infer
			if got, err = pipeline.Replay(ctx, in, try, *popts); err != nil {
				return nil, nil, nil, 0, err
			}
			differs := 0
			for _, d := range got.Result.Devices {
				differs += d.NumMismatches
			}
			if differs == 0 {
				filled, want, base, rec = true, try, try, got
				break
			}
			if infer {
				fillDiffers = differs
			}
			if restart != nil {
				if err := restart(); err != nil {
					return nil, nil, nil, 0, err
				}
			}
		}
	}

	// The recorded column is the model under the recorded settings, which
	// reproduces the recording exactly (and counts retries, which a trace
	// does not show); both replays run at once. When the settings asked for
	// are the recorded ones on the simulated device, one replay is both.
	if !filled {
		// The recorded replay's stats and summaries are the recorded
		// column; its mismatches are nobody's.
		recOpts := pipeline.Options{Analysis: popts.Analysis, SkipCompare: true}
		start = time.Now()
		switch {
		case want == base && !onDevice:
			got, err = pipeline.Replay(ctx, in, want, *popts)
			rec = got
		case onDevice:
			// Apart, so that the simulated replay never holds back the
			// device's, whose time is reported.
			var recErr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				rec, recErr = pipeline.Replay(ctx, in, base, recOpts)
			}()
			got, err = pipeline.Replay(ctx, in, want, *popts)
			<-done
			if err == nil {
				err = recErr
			}
		default:
			// One reading of the trace feeds both.
			var runs []*pipeline.Run
			if runs, err = pipeline.ReplayEach(ctx, in, []pipeline.Resolved{want, base}, []pipeline.Options{*popts, recOpts}); err == nil {
				got, rec = runs[0], runs[1]
			}
		}
		if err != nil {
			return nil, nil, nil, 0, err
		}
	}
	wall = time.Since(start)
	out = buildReplayJSON(in, base, want, rec, got)
	out.LimitFilledIn = filled
	if fillTried && !filled {
		out.LimitNote = fmt.Sprintf("the trace does not store the run's memory limit; with %s the replay differs from the recording at %d events, so it is not the run's: replayed as another setting",
			analysis.Bytes(want.Limit), fillDiffers)
	}
	return out, rec, got, wall, nil
}

func buildReplayJSON(in *pipeline.Input, base, want pipeline.Resolved, rec, got *pipeline.Run) *replayJSON {
	out := &replayJSON{
		Trace: in.Name,
		Settings: map[string]settingsJSON{
			"recorded": {Conf: base.Conf.String(), Round: base.Conf.MinBlockSize, LimitBytes: base.Limit, Label: base.Label},
			"replayed": {Conf: want.Conf.String(), Round: want.Conf.MinBlockSize, LimitBytes: want.Limit, Label: want.Label},
		},
		Recorded: map[string]int64{}, Replayed: map[string]int64{},
		Fragmentation: map[string]analysis.Fragmentation{}, OOMs: []oomJSON{},
		Devices: map[string]*replayDeviceJSON{},
	}
	dev := func(d int32) *replayDeviceJSON {
		k := fmt.Sprint(d)
		if out.Devices[k] == nil {
			out.Devices[k] = &replayDeviceJSON{Recorded: map[string]int64{}, Replayed: map[string]int64{},
				Fragmentation: map[string]analysis.Fragmentation{}, OOMs: []oomJSON{}}
		}
		return out.Devices[k]
	}
	for _, d := range rec.Result.Devices {
		dev(d.Device).Recorded = d.Stats.Map()
	}
	mismatches := 0
	for _, d := range got.Result.Devices {
		j := dev(d.Device)
		j.Replayed = d.Stats.Map()
		j.Mismatches = d.NumMismatches
		mismatches += d.NumMismatches
		for _, o := range d.OOMs {
			site := ""
			if st := got.OOMStacks[o.Stack]; len(st) > 0 {
				site = analysis.ShortFrame(st[0])
			}
			j.OOMs = append(j.OOMs, oomJSON{Seq: o.Seq, Size: o.Size, Stream: o.Stream, FreeCached: o.FreeCached, Recorded: o.Recorded, Site: site})
		}
	}
	for _, s := range rec.Summaries {
		dev(s.Device).Fragmentation["recorded"] = s.Fragmentation
	}
	for _, s := range got.Summaries {
		dev(s.Device).Fragmentation["replayed"] = s.Fragmentation
	}
	out.Reproduced = want.Recorded && mismatches == 0 && len(got.Result.Devices) > 0
	// The top-level keys are the first device's, as before there were
	// per-device ones.
	if len(got.Result.Devices) > 0 {
		first := out.Devices[fmt.Sprint(got.Result.Devices[0].Device)]
		out.Recorded, out.Replayed, out.OOMs, out.Mismatches = first.Recorded, first.Replayed, first.OOMs, first.Mismatches
		out.Fragmentation = first.Fragmentation
	}
	if len(rec.Result.Devices) > 0 {
		out.Recorded = out.Devices[fmt.Sprint(rec.Result.Devices[0].Device)].Recorded
	}
	return out
}

func deviceReport(gpu *cuda.Device, events int64, wall time.Duration) *deviceJSON {
	t := gpu.Timings()
	calls := map[string]latencyJSON{}
	var devTime time.Duration
	for name, l := range map[string]cuda.Latency{"malloc": t.Malloc, "free": t.Free, "reserve": t.Reserve, "map": t.Map, "unmap": t.Unmap, "release": t.Release} {
		devTime += l.Total
		if l.Count > 0 {
			calls[name] = latencyJSON{Count: l.Count, MeanUs: float64(l.Mean()) / 1e3, MaxUs: float64(l.Max) / 1e3}
		}
	}
	d := &deviceJSON{Name: gpu.Name(), Events: events, WallSeconds: wall.Seconds(), DeviceSeconds: devTime.Seconds(), Calls: calls, OldCalls: calls}
	if events > 0 {
		d.AllocatorNsPer = float64(wall-devTime) / float64(events)
	}
	return d
}

func writeReplay(w io.Writer, in *pipeline.Input, r *replayJSON, got *pipeline.Run) {
	rs, ps := r.Settings["recorded"], r.Settings["replayed"]
	fmt.Fprintf(w, "%s\n  recorded settings: %s\n  replayed settings: %s\n", in.Name, rs.Label, ps.Label)
	devs := make([]int32, 0, len(r.Devices))
	for k := range r.Devices {
		var d int32
		fmt.Sscan(k, &d)
		devs = append(devs, d)
	}
	slices.Sort(devs)
	for _, d := range devs {
		fmt.Fprintln(w)
		if len(devs) > 1 {
			fmt.Fprintf(w, "device %d\n", d)
		}
		writeReplayDevice(w, r.Devices[fmt.Sprint(d)], ps.Label == rs.Label || r.LimitFilledIn)
	}
	mismatches := 0
	for _, d := range r.Devices {
		mismatches += d.Mismatches
	}
	if r.LimitNote != "" {
		fmt.Fprintf(w, "note: %s\n", r.LimitNote)
	}
	if r.Device != nil {
		// No event-by-event comparison on a real device (see runReplay).
	} else if r.LimitFilledIn {
		fmt.Fprintf(w, "the trace does not store the run's memory limit; with %s filled in, the replay under the recorded settings reproduces every recorded event\n",
			analysis.Bytes(ps.LimitBytes))
	} else if ps.Label == rs.Label && mismatches == 0 {
		fmt.Fprintf(w, "the replay under the recorded settings reproduces every recorded event\n")
	} else if ps.Label == rs.Label {
		fmt.Fprintf(w, "warning: the model differs from the recording at %d events\n", mismatches)
	}
	if d := r.Device; d != nil {
		fmt.Fprintf(w, "on %s: %d events in %.3f s, %.0f ns/event of tracer's own work (reading, model, analysis) besides device calls\n", d.Name, d.Events, d.WallSeconds, d.AllocatorNsPer)
		for _, name := range []string{"malloc", "free", "reserve", "map", "unmap", "release"} {
			if l, ok := d.Calls[name]; ok {
				fmt.Fprintf(w, "  %-8s %6d calls, mean %8.1f µs, max %8.1f µs\n", name, l.Count, l.MeanUs, l.MaxUs)
			}
		}
	}
}

// writeReplayDevice prints one device's recorded and replayed figures side
// by side, and its OOMs; asRecorded says the replay was under the recorded
// settings, where an OOM the recording had is that OOM, not a new one at
// the same request.
func writeReplayDevice(w io.Writer, r *replayDeviceJSON, asRecorded bool) {
	fmt.Fprintf(w, "%-26s %14s %14s %20s\n", "", "recorded", "replayed", "change")
	bytesRow := func(label, key string) {
		a, b := r.Recorded[key], r.Replayed[key]
		fmt.Fprintf(w, "%-26s %14s %14s %20s\n", label, analysis.Bytes(a), analysis.Bytes(b), bytesDelta(a, b))
	}
	countRow := func(label, key string) {
		a, b := r.Recorded[key], r.Replayed[key]
		fmt.Fprintf(w, "%-26s %14d %14d %20s\n", label, a, b, countDelta(a, b))
	}
	bytesRow("allocated peak", "allocated_bytes.all.peak")
	bytesRow("reserved peak", "reserved_bytes.all.peak")
	bytesRow("active peak", "active_bytes.all.peak")
	bytesRow("requested peak", "requested_bytes.all.peak")
	bytesRow("inactive split peak", "inactive_split_bytes.all.peak")
	countRow("segments peak", "segment.all.peak")
	countRow("device mallocs", "num_device_alloc")
	countRow("device frees", "num_device_free")
	countRow("alloc retries", "num_alloc_retries")
	countRow("OOMs", "num_ooms")
	fr, fp := r.Fragmentation["recorded"], r.Fragmentation["replayed"]
	fmt.Fprintf(w, "%-26s %14s %14s %20s\n", "external frag at peak", analysis.Bytes(int64(fr.ExternalAtReservedPeak)), analysis.Bytes(int64(fp.ExternalAtReservedPeak)), bytesDelta(int64(fr.ExternalAtReservedPeak), int64(fp.ExternalAtReservedPeak)))
	fmt.Fprintf(w, "%-26s %13.1f%% %13.1f%% %20s\n", "1 − active/reserved peak", 100*fr.GMLake, 100*fp.GMLake, fmt.Sprintf("%+.1f pt", 100*(fp.GMLake-fr.GMLake)))
	for i, o := range r.OOMs {
		if i == 5 {
			fmt.Fprintf(w, "... %d more OOMs\n", len(r.OOMs)-5)
			break
		}
		was := "new: the recording did not fail here"
		switch {
		case o.Recorded && asRecorded:
			was = "as recorded"
		case o.Recorded:
			was = "the recording failed at this request too"
		}
		fmt.Fprintf(w, "OOM at event %d: %s on stream %d with %s free in the cache (%s)\n", o.Seq, analysis.Bytes(o.Size), o.Stream, analysis.Bytes(o.FreeCached), was)
		if o.Site != "" {
			fmt.Fprintf(w, "  requested at %s\n", o.Site)
		}
	}
}

func bytesDelta(a, b int64) string {
	if a == b {
		return "="
	}
	d := analysis.Bytes(b - a).String()
	if b > a {
		d = "+" + d
	}
	if a == 0 {
		return d
	}
	return fmt.Sprintf("%s (%+.1f%%)", d, 100*float64(b-a)/float64(a))
}

func countDelta(a, b int64) string {
	if a == b {
		return "="
	}
	return fmt.Sprintf("%+d", b-a)
}
