package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

type infoOptions struct {
	Path string
	// Paths are the traces given, several (a table by rank) when several
	// is set.
	Paths   []string
	several bool
	JSON    bool
	Out     io.Writer
	Err     io.Writer // warnings (a trace cut short, in the table by rank)
}

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newInfoCmd(nil) })
}

func newInfoCmd(runF func(context.Context, *infoOptions) error) *cobra.Command {
	opts := &infoOptions{}
	cmd := &cobra.Command{
		Use:   "info [TRACE... | DIR]",
		Short: "Describe a trace: events, devices, time span, memory_stats() peaks",
		Long: `Info says what a trace holds: its source and settings, the events by action,
devices and streams, the time span, whether the history is complete, and the
torch.cuda.memory_stats() peaks and counters computed from the events (through
the allocator model under the recorded settings, which also checks that the
model reproduces the recording).

Figures that are not the run's say so. Where the model leaves the recording
(settings that are not the run's, such as a memory limit the snapshot did not
store), block sizes from there on are unknown and the peaks use rounded
request sizes: info marks them approximate, says why and what fixes it. A
history that starts mid-run (ring buffer wrapped) gives the peaks and counters
of the retained window, which are lower bounds of the run's; its
reconstructed events (the state at its start) are counted apart.

With --json the output is a stable contract:
  {"format_version", "events", "actions": {name: count}, "devices", "streams",
   "time_span_us", "truncated", "stats": {memory_stats() key: value},
   "recorded_actions", "reconstructed_actions": {name: count},
   "approximate", "approximate_reason", "peaks_lower_bound",
   "num_alloc_retries", "memory_limit_bytes", "memory_limit_inferred",
   "per_device": {ordinal: {"stats", "model_mismatches", "num_alloc_retries",
   "approximate", "approximate_reason"}}, ...}
num_alloc_retries is the allocator model's (a trace does not show retries).

Several traces (the ranks of a distributed run), or a folder of them, give a
table by rank: peak allocated and reserved, fragmentation and OOMs, and the
rank that peaks highest, by how much above the median and the lowest; with
--json, {"ranks": {"rows", "allocated", "reserved"}, "traces": [the above,
with "trace" and "rank"]}.`,
		Example: `  tracer info run.arrows
  tracer info run.arrows --json | jq '.stats["reserved_bytes.all.peak"]'
  tracer info traces/    # one row per rank (tracer import snapshots/ -o traces/)
  tracer info traces/ --json | jq .ranks.reserved
  tracer info            # the built-in sample`,
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
			if runF == nil {
				runF = runInfo
			}
			return runF(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON (a stable contract) instead of text")
	return cmd
}

// infoJSON is the --json contract of tracer info. Add fields; never rename.
type infoJSON struct {
	// Trace and Rank are set when info reports several traces.
	Trace         string           `json:"trace,omitempty"`
	Rank          *int             `json:"rank,omitempty"`
	FormatVersion int              `json:"format_version"`
	Events        int64            `json:"events"`
	Actions       map[string]int64 `json:"actions"`
	Devices       []int32          `json:"devices"`
	Streams       []uint64         `json:"streams"`
	TimeSpanUs    int64            `json:"time_span_us"`
	// Truncated: the history is incomplete (ring buffer wrapped, or the
	// stream was cut short).
	Truncated     bool                        `json:"truncated"`
	CutShort      bool                        `json:"cut_short"`
	Reconstructed int64                       `json:"reconstructed_events"`
	Stats         map[string]int64            `json:"stats"`
	DeviceStats   map[string]map[string]int64 `json:"device_stats"`
	Source        string                      `json:"source"`
	SourceFile    string                      `json:"source_file,omitempty"`
	Producer      string                      `json:"producer"`
	AllocConf     string                      `json:"alloc_conf"`
	DeviceName    string                      `json:"device_name,omitempty"`
	DeviceTotal   int64                       `json:"device_total_bytes,omitempty"`
	MemoryLimit   int64                       `json:"memory_limit_bytes,omitempty"`
	// MemoryLimitInferred: the trace did not store the run's limit, and
	// import took MemoryLimit for it (MemoryLimitNote says how).
	MemoryLimitInferred bool   `json:"memory_limit_inferred"`
	MemoryLimitNote     string `json:"memory_limit_note,omitempty"`
	// NumAllocRetries is PyTorch's num_alloc_retries (mallocs that freed
	// the cache and tried again), which a trace does not show: the
	// allocator model's, replaying under the recorded settings. Device 0's
	// (the first device's); per_device has each.
	NumAllocRetries int64    `json:"num_alloc_retries"`
	Mismatches      int      `json:"model_mismatches"`
	Warnings        []string `json:"warnings"`
	// RecordedActions is Actions less the reconstructed events, which
	// ReconstructedActions counts.
	RecordedActions      map[string]int64 `json:"recorded_actions"`
	ReconstructedActions map[string]int64 `json:"reconstructed_actions"`
	// Approximate: some block sizes are unknown (the model left the
	// recording), so peaks and fragmentation use rounded request sizes;
	// ApproximateReason says where, why and what fixes it.
	Approximate       bool   `json:"approximate"`
	ApproximateReason string `json:"approximate_reason,omitempty"`
	// PeaksLowerBound: the history starts mid-run (or was cut short), so
	// the peaks and counters are the retained window's, lower bounds of
	// the run's.
	PeaksLowerBound bool `json:"peaks_lower_bound"`
	// PerDevice holds the same per CUDA device, by ordinal.
	PerDevice map[string]*infoDeviceJSON `json:"per_device"`
	// Scopes are the record_function scopes the trace recorded (its
	// phases; see tracer analyze), by name.
	Scopes []analysis.ScopeCount `json:"scopes"`
}

// infoDeviceJSON is one device's part of infoJSON.
type infoDeviceJSON struct {
	Stats             map[string]int64 `json:"stats"`
	Mismatches        int              `json:"model_mismatches"`
	NumAllocRetries   int64            `json:"num_alloc_retries"`
	Approximate       bool             `json:"approximate"`
	ApproximateReason string           `json:"approximate_reason,omitempty"`
}

func runInfo(ctx context.Context, opts *infoOptions) error {
	if opts.several {
		return runInfoRanks(ctx, opts)
	}
	in, run, out, err := infoOf(ctx, opts.Path, analysis.Options{}, nil)
	if err != nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return writeInfo(opts.Out, in, run, out)
}

// infoOf opens the trace at path and works out what info reports of it,
// analysing it with aopt.
func infoOf(ctx context.Context, path string, aopt analysis.Options, warn func(string)) (*pipeline.Input, *pipeline.Run, *infoJSON, error) {
	in, err := pipeline.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	in.Warn = warn // a trace cut short: info says so in its report, diff and the rank table warn
	set, err := in.RecordedSettings()
	if err != nil {
		return nil, nil, nil, err
	}
	// The replay under the recorded settings checks the model against the
	// recording; the figures come from the recording itself. The two passes
	// run at once.
	var (
		sums    []*analysis.Summary
		facts   trace.Facts
		sumsErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		sums, facts, sumsErr = pipeline.Analyze(ctx, in, aopt)
	}()
	run, err := pipeline.Replay(ctx, in, set, pipeline.Options{})
	<-done
	if sumsErr != nil {
		return nil, nil, nil, sumsErr
	}
	if err != nil {
		return nil, nil, nil, err
	}
	run.Summaries, run.Facts = sums, facts
	return in, run, buildInfo(in, run), nil
}

func buildInfo(in *pipeline.Input, run *pipeline.Run) *infoJSON {
	f := run.Facts
	m := in.Meta
	out := &infoJSON{
		FormatVersion: int(m.Version), Events: f.Events, Actions: f.Actions(), Devices: f.Devices,
		Streams: f.Streams, TimeSpanUs: f.SpanUs(), Truncated: m.Truncated || f.Truncated,
		CutShort: f.Truncated, Reconstructed: f.Reconstructed, Source: m.Source, SourceFile: m.SourceFile,
		Producer: m.Producer, AllocConf: m.AllocConf, DeviceName: m.DeviceName, DeviceTotal: m.DeviceTotal,
		MemoryLimit: m.MemoryLimit, Stats: map[string]int64{}, DeviceStats: map[string]map[string]int64{},
		Warnings: []string{}, RecordedActions: f.RecordedActions(), ReconstructedActions: f.ReconstructedActions(),
		PeaksLowerBound: m.Truncated || f.Truncated, PerDevice: map[string]*infoDeviceJSON{},
		Scopes: analysis.ScopeCounts(m.Annotations),
	}
	for i, s := range run.Summaries {
		if i == 0 {
			out.Stats = s.Stats
		}
		out.DeviceStats[fmt.Sprint(s.Device)] = s.Stats
		dj := &infoDeviceJSON{Stats: s.Stats}
		out.PerDevice[fmt.Sprint(s.Device)] = dj
		if s.Approximate {
			dj.Approximate = true
			dj.ApproximateReason = approximateReason(in, s.Device, run.Result)
			if !out.Approximate {
				out.Approximate, out.ApproximateReason = true, dj.ApproximateReason
			}
		}
		if s.Unmatched > 0 {
			out.Warnings = append(out.Warnings, fmt.Sprintf("device %d: %d events contradict the state before them (frees of unknown blocks, double frees, frees of unknown segments)", s.Device, s.Unmatched))
		}
	}
	if note, ok := m.Extra["memory_limit"]; ok && m.MemoryLimit > 0 && strings.HasPrefix(note, "inferred") {
		out.MemoryLimitInferred, out.MemoryLimitNote = true, note
	}
	for i, d := range run.Result.Devices {
		out.Mismatches += d.NumMismatches
		if i == 0 {
			out.NumAllocRetries = d.Stats.NumAllocRetries
		}
		if dj := out.PerDevice[fmt.Sprint(d.Device)]; dj != nil {
			dj.Mismatches = d.NumMismatches
			dj.NumAllocRetries = d.Stats.NumAllocRetries
		}
		for i, mm := range d.Mismatches {
			if i == 3 {
				break
			}
			out.Warnings = append(out.Warnings, fmt.Sprintf("device %d: the model differs from the recording at event %d: %s", d.Device, mm.Seq, mm.What))
		}
	}
	if f.Unknown > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d events have an action this tracer does not know; skipped", f.Unknown))
	}
	return out
}

// approximateReason says why device's block sizes are partly unknown, and
// what fixes it: the first event where the replay under the recorded
// settings differs from the recording (where the import's model left it).
func approximateReason(in *pipeline.Input, device int32, res *replay.Result) string {
	where := "some allocations carry no block size (the producer did not record them)"
	for _, d := range res.Devices {
		if d.Device != device || len(d.Mismatches) == 0 {
			continue
		}
		first := d.Mismatches[0].Seq
		for _, mm := range d.Mismatches {
			first = min(first, mm.Seq)
		}
		where = fmt.Sprintf("block sizes are unknown from event %d on, where the allocator model, replaying under the recorded settings, leaves the recording", first)
	}
	fix := "the recorded settings are not the run's"
	switch m := in.Meta; {
	case m.MemoryFraction > 0:
		fix = "the --fraction given to tracer import may not be the run's: import again with the run's --fraction and --total-memory"
	case in.LimitUnknown():
		fix = "if the run had a memory limit (torch.cuda.set_per_process_memory_fraction), which snapshots do not store, import again with --fraction F --total-memory T; otherwise the recorded settings or PyTorch version are not ones the model reproduces"
	}
	return fmt.Sprintf("device %d: %s, so peaks and fragmentation from there use rounded request sizes; %s", device, where, fix)
}

func writeInfo(w io.Writer, in *pipeline.Input, run *pipeline.Run, j *infoJSON) error {
	m := in.Meta
	p := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-11s %s\n", label, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(w, "%s\n", in.Name)
	src := m.Source
	if m.SourceFile != "" {
		src += " " + m.SourceFile
	}
	p("source", "%s (%s, trace format v%d)", src, m.Producer, m.Version)
	conf := m.AllocConf
	if conf == "" {
		conf = "(none: defaults)"
	}
	p("settings", "PYTORCH_CUDA_ALLOC_CONF=%s", conf)
	if m.DeviceName != "" || m.DeviceTotal > 0 {
		p("device", "%s, %s", orUnknown(m.DeviceName), analysis.Bytes(m.DeviceTotal))
	}
	switch {
	case j.MemoryLimitInferred:
		p("limit", "%s per process, INFERRED (%s; tracer import --fraction F --total-memory T gives the run's)", analysis.Bytes(m.MemoryLimit), strings.TrimPrefix(j.MemoryLimitNote, "inferred: "))
	case m.MemoryLimit > 0:
		p("limit", "%s per process", analysis.Bytes(m.MemoryLimit))
	}
	span := "no timestamps"
	if j.TimeSpanUs > 0 {
		span = "over " + analysis.Duration(j.TimeSpanUs)
	}
	p("events", "%s %s; %s, %s", analysis.Count(j.Events), span, plural(len(j.Devices), "device"), plural(len(j.Streams), "stream"))
	if len(j.ReconstructedActions) > 0 {
		p("actions", "%s recorded", actionList(j.RecordedActions))
		p("", "%s reconstructed (the state at the start)", actionList(j.ReconstructedActions))
	} else {
		p("actions", "%s", actionList(j.Actions))
	}
	switch {
	case j.CutShort:
		p("history", "CUT SHORT: the stream ends without its end marker (a killed recording?); all whole batches were read")
	case j.Truncated:
		p("history", "incomplete at its start (ring buffer wrapped); %d reconstructed events restore the state", j.Reconstructed)
	default:
		p("history", "complete")
	}
	if len(j.Scopes) > 0 {
		var names []string
		for i, sc := range j.Scopes {
			if i == 3 {
				names = append(names, fmt.Sprintf("%d more", len(j.Scopes)-i))
				break
			}
			names = append(names, fmt.Sprintf("%s ×%d", sc.Name, sc.Entered))
		}
		p("scopes", "%s (record_function: the phases of analyze)", strings.Join(names, ", "))
	}
	for _, s := range run.Summaries {
		st := s.Stats
		dev := ""
		if len(run.Summaries) > 1 {
			dev = fmt.Sprintf(" (device %d)", s.Device)
		}
		if j.PeaksLowerBound {
			p("", "peaks and counters of the retained window: lower bounds of the run's%s", dev)
		}
		if s.Approximate {
			p("", "APPROXIMATE%s: %s", dev, j.PerDevice[fmt.Sprint(s.Device)].ApproximateReason)
		}
		p("peaks"+dev, "allocated %s, reserved %s, active %s, requested %s",
			analysis.Bytes(st["allocated_bytes.all.peak"]), analysis.Bytes(st["reserved_bytes.all.peak"]),
			analysis.Bytes(st["active_bytes.all.peak"]), analysis.Bytes(st["requested_bytes.all.peak"]))
		retries := j.NumAllocRetries
		if dj := j.PerDevice[fmt.Sprint(s.Device)]; dj != nil {
			retries = dj.NumAllocRetries
		}
		p("counters", "%s at peak, %s, %s, %s, %s, %s",
			countOf(st["segment.all.peak"], "segment"), countOf(st["num_device_alloc"], "device malloc"), countOf(st["num_device_free"], "device free"),
			countOf(st["allocation.all.allocated"], "allocation"), countOf(retries, "alloc retry"), countOf(st["num_ooms"], "OOM"))
	}
	if j.Mismatches == 0 {
		p("model", "replaying under the recorded settings reproduces every recorded event")
	} else {
		p("model", "%d events differ from the recording when replayed under its settings", j.Mismatches)
	}
	for _, warn := range j.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return nil
}

func actionList(actions map[string]int64) string {
	names := make([]string, 0, len(actions))
	for name := range actions {
		names = append(names, name)
	}
	order := map[string]int{}
	for i, k := range trace.Kinds() {
		order[k.String()] = i
	}
	sort.Slice(names, func(a, b int) bool { return order[names[a]] < order[names[b]] })
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + " " + analysis.Count(actions[name])
	}
	return strings.Join(parts, ", ")
}

// countOf is n and word, plural unless n is 1, with thousands separators:
// "1 OOM", "2 OOMs", "1,024 allocations", "3 alloc retries".
func countOf(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "y") {
		return analysis.Count(n) + " " + strings.TrimSuffix(word, "y") + "ies"
	}
	return analysis.Count(n) + " " + word + "s"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown GPU"
	}
	return s
}
