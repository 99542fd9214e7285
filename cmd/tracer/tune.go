package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/plots"
	"github.com/tracer-dev/tracer/tune"
)

type tuneOptions struct {
	Path      string
	Limit     string
	Objective string
	Top       int
	JSON      bool
	Plot      string
	Out, Err  io.Writer
}

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newTuneCmd(nil) })
}

func newTuneCmd(runF func(context.Context, *tuneOptions) error) *cobra.Command {
	opts := &tuneOptions{}
	cmd := &cobra.Command{
		Use:   "tune [TRACE] [--limit SIZE] [--objective reserved|fit] [--top N] [--json] [-o PLOT]",
		Short: "Find the PYTORCH_CUDA_ALLOC_CONF that reserves least, or fits the smallest GPU",
		Long: `Tune replays the trace on the allocator model under many settings of
PYTORCH_CUDA_ALLOC_CONF (expandable_segments, max_split_size_mb,
roundup_power2_divisions as single values and per-interval lists,
garbage_collection_threshold under a limit, max_non_split_rounding_mb,
large_segment_size_mb, and their combinations) on every core, and ranks them.
It tries each knob alone, then descends by coordinates from the best: every
value of every knob with the others held, until nothing does better. The
search is deterministic. Progress goes to stderr; the last line printed is the
one to paste.

--objective reserved (the default) ranks by OOMs under --limit (fewest
first), then peak reserved bytes, then device mallocs and frees (each a slow
driver call), then alloc retries. --limit is the per-process memory limit of
every replay (default: the trace's own; "none" removes it); garbage collection
is only tried under a limit.

--objective fit finds, for each setting, the smallest memory limit under which
the run has no OOM (a bisection in 2 MiB steps, each step a replay), and ranks
by it: "needs 23.4 GiB with defaults, 19.1 GiB with expandable_segments:True".
With --limit it answers whether the run fits in that much memory.

Every OOM of the recorded settings under the limit (with fit, under --limit
when they need more) gets a verdict: the limit (the live blocks and the
request exceed it) or fragmentation (they fit, but no free block is large
enough), who was live, and which settings avoid it.

-o draws the reserved memory of the best three settings against the recorded
run (PNG, SVG or PDF). Without TRACE, the built-in sample trace is tuned.

` + sizeRule,
		Example: `  tracer tune                                   # the built-in sample
  tracer tune run.arrows
  tracer tune run.arrows --limit 24GiB          # fewest OOMs, then least reserved, under 24 GiB
  tracer tune run.arrows --objective fit        # the smallest GPU each setting needs
  tracer tune run.arrows --objective fit --limit 24GiB   # ... and does it fit in 24 GiB?
  tracer tune run.arrows --top 20 -o tune.png
  tracer tune run.arrows --json | jq -r .alloc_conf_line`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Path = args[0]
			}
			opts.Out, opts.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if opts.Objective != "reserved" && opts.Objective != "fit" {
				return usagef("--objective %q: want reserved or fit", opts.Objective)
			}
			if opts.Top < 1 {
				return usagef("--top %d: want a positive number", opts.Top)
			}
			if opts.Plot != "" {
				switch strings.ToLower(filepath.Ext(opts.Plot)) {
				case ".png", ".svg", ".pdf":
				default:
					return usagef("-o %s: want a .png, .svg or .pdf file", opts.Plot)
				}
			}
			if runF == nil {
				runF = runTune
			}
			return runF(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Limit, "limit", "", `per-process memory limit (reserved) or the memory to fit in (fit), e.g. 24GiB, or "none"`)
	f.StringVar(&opts.Objective, "objective", "reserved", "reserved (fewest OOMs, then least reserved) or fit (smallest limit with no OOM)")
	f.IntVar(&opts.Top, "top", 10, "settings to list")
	f.BoolVar(&opts.JSON, "json", false, "print JSON (a stable contract) instead of text")
	f.StringVarP(&opts.Plot, "output", "o", "", "draw the best settings' reserved memory against the recorded run (.png, .svg, .pdf)")
	return cmd
}

// tuneJSON is the --json contract of tracer tune. Add fields; never rename.
type tuneJSON struct {
	Trace      string `json:"trace"`
	Objective  string `json:"objective"`
	LimitBytes int64  `json:"limit_bytes"`
	// Devices counts the trace's GPUs; with several, a peak is the
	// fullest one's, and an OOM on any counts.
	Devices int `json:"devices"`
	// HistoryTruncated: the trace starts mid-run, and every setting starts
	// from the recorded state (see tracer info).
	HistoryTruncated bool `json:"history_truncated"`
	// Fits (fit, with --limit): the best setting needs no more than it.
	Fits          *bool           `json:"fits,omitempty"`
	SettingsTried int             `json:"settings_tried"`
	Replays       int             `json:"replays"`
	Passes        int             `json:"passes"`
	Recorded      candidateJSON   `json:"recorded"`
	Best          candidateJSON   `json:"best"`
	Ranked        []candidateJSON `json:"ranked"`
	NoEffect      []string        `json:"no_effect"`
	NotTried      []string        `json:"not_tried"`
	// OOMs are the recorded settings' failures under the limit (with fit,
	// the memory asked about) with their verdicts; seq is the failed
	// request's place in the trace.
	OOMs          []analysis.OOM `json:"ooms"`
	AllocConfLine string         `json:"alloc_conf_line"`
}

type candidateJSON struct {
	Rank               int    `json:"rank"`
	Conf               string `json:"conf"`
	Label              string `json:"label"`
	Recorded           bool   `json:"recorded"`
	LimitBytes         int64  `json:"limit_bytes"`
	PeakReservedBytes  int64  `json:"peak_reserved_bytes"`
	PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
	ChangeBytes        int64  `json:"change_vs_recorded_bytes"`
	OOMs               int64  `json:"ooms"`
	DeviceMallocs      int64  `json:"device_mallocs"`
	DeviceFrees        int64  `json:"device_frees"`
	Retries            int64  `json:"alloc_retries"`
	FitBytes           int64  `json:"fit_bytes,omitempty"` // fit: the smallest limit with no OOM; -1: none
	// Same counts the other settings tried that did exactly the same (every
	// memory_stats() counter equal), left out of ranked; SameAsRecorded says
	// the recorded settings are among them.
	Same           int  `json:"same_results"`
	SameAsRecorded bool `json:"same_as_recorded"`
}

func runTune(ctx context.Context, opts *tuneOptions) error {
	if opts.Plot != "" {
		if err := outfile.Check(opts.Plot, opts.Path); err != nil {
			return err
		}
	}
	in, err := pipeline.Open(opts.Path)
	if err != nil {
		return err
	}
	in.Warn = warnTo(opts.Err)
	s, err := parseSettings("", 0, opts.Limit)
	if err != nil {
		return err
	}
	if in.Sample {
		fmt.Fprintf(opts.Err, "tuning the built-in sample trace: %s\n(pass a TRACE to tune your own; tracer import turns a PyTorch snapshot into one)\n", in.Name)
	}
	if in.Meta.Truncated {
		// README, Exactness: a replay under other settings starts from the
		// recorded state, which those settings did not make.
		fmt.Fprintln(opts.Err, "note: the history starts mid-run (PyTorch's ring buffer wrapped): every setting starts from the recorded segments, so settings show only what they change after the first event")
	}
	topt := tune.Options{Limit: s.Limit, Progress: func(msg string) { fmt.Fprintln(opts.Err, msg) }}
	if opts.Objective == "fit" {
		topt.Objective = tune.Fit
	}
	rep, err := tune.Search(ctx, in, topt)
	if err != nil {
		return err
	}
	ooms, err := tune.OOMVerdicts(ctx, in, rep)
	if err != nil {
		return err
	}
	out := buildTuneJSON(in, rep, opts.Top, ooms)
	if opts.Plot != "" {
		if err := tunePlot(ctx, in, rep, opts.Plot); err != nil {
			return err
		}
		fmt.Fprintf(opts.Err, "wrote %s\n", opts.Plot)
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	writeTune(opts.Out, out)
	return nil
}

func toCandidateJSON(rank int, c *tune.Candidate, rec *tune.Candidate) candidateJSON {
	return candidateJSON{Rank: rank, Conf: c.Conf, Label: c.Label, Recorded: c.Recorded, LimitBytes: c.LimitBytes,
		PeakReservedBytes: c.PeakReservedBytes, PeakAllocatedBytes: c.PeakAllocatedBytes,
		ChangeBytes: c.PeakReservedBytes - rec.PeakReservedBytes, OOMs: c.OOMs,
		DeviceMallocs: c.DeviceMallocs, DeviceFrees: c.DeviceFrees, Retries: c.Retries, FitBytes: c.FitBytes, Same: c.Same, SameAsRecorded: c.SameAsRecorded}
}

func buildTuneJSON(in *pipeline.Input, rep *tune.Report, top int, ooms []analysis.OOM) *tuneJSON {
	out := &tuneJSON{Trace: in.Name, Objective: rep.Objective.String(), LimitBytes: rep.LimitBytes,
		Devices: len(rep.Recorded.Devices), HistoryTruncated: in.Meta.Truncated,
		SettingsTried: len(rep.Ranked), Replays: rep.Replays, Passes: rep.Passes,
		Ranked: []candidateJSON{}, NoEffect: append([]string{}, rep.NoEffect...),
		NotTried: append([]string{}, rep.NotTried...), OOMs: ooms, AllocConfLine: rep.Line()}
	// The table's rows: settings that did exactly the same are one row,
	// ranked as the first of them; the recorded settings and the best take
	// the rank of their row.
	best := rep.Best()
	for i, c := range rep.Distinct() {
		j := toCandidateJSON(i+1, &c, &rep.Recorded)
		if i < top {
			out.Ranked = append(out.Ranked, j)
		}
		if c.Recorded || c.SameAsRecorded {
			out.Recorded = toCandidateJSON(i+1, &rep.Recorded, &rep.Recorded)
		}
		if c.Conf == best.Conf && c.Recorded == best.Recorded {
			out.Best = j
		}
	}
	if rep.Objective == tune.Fit && rep.LimitBytes > 0 {
		fits := out.Best.FitBytes > 0 && out.Best.FitBytes <= rep.LimitBytes
		out.Fits = &fits
	}
	return out
}

func writeTune(w io.Writer, r *tuneJSON) {
	fmt.Fprintf(w, "%s: %d settings tried (%d replays in %d passes over the trace)\n", r.Trace, r.SettingsTried, r.Replays, r.Passes)
	if r.Devices > 1 {
		fmt.Fprintf(w, "%d GPUs: each peak is the fullest GPU's, and the limit is each GPU's\n", r.Devices)
	}
	if r.Objective == "reserved" {
		limit := "no memory limit"
		if r.LimitBytes > 0 {
			limit = "under a limit of " + analysis.Bytes(r.LimitBytes).String()
		}
		fmt.Fprintf(w, "ranked by OOMs, then peak reserved, then device calls, %s\n\n", limit)
		fmt.Fprintf(w, "%4s %13s %22s %5s %8s %7s  %s\n", "", "peak reserved", "vs recorded", "OOMs", "dev calls", "retries", "setting")
	} else {
		fmt.Fprintf(w, "ranked by the smallest memory limit with no OOM (found in 2 MiB steps)\n\n")
		fmt.Fprintf(w, "%4s %11s %13s %9s  %s\n", "", "needs", "peak reserved", "dev calls", "setting")
	}
	row := func(c candidateJSON) {
		label := c.Label
		switch {
		case c.Recorded:
			label += " (recorded)"
		case c.SameAsRecorded:
			label += " (as recorded)"
		}
		if c.Same > 0 {
			label += fmt.Sprintf(" (and %d more alike)", c.Same)
		}
		if r.Objective == "reserved" {
			fmt.Fprintf(w, "%4d %13s %22s %5d %9d %7d  %s\n", c.Rank, analysis.Bytes(c.PeakReservedBytes),
				bytesDelta(r.Recorded.PeakReservedBytes, c.PeakReservedBytes), c.OOMs, c.DeviceMallocs+c.DeviceFrees, c.Retries, label)
			return
		}
		fmt.Fprintf(w, "%4d %11s %13s %9d  %s\n", c.Rank, fitText(c.FitBytes), analysis.Bytes(c.PeakReservedBytes), c.DeviceMallocs+c.DeviceFrees, label)
	}
	recShown := false
	for _, c := range r.Ranked {
		row(c)
		recShown = recShown || c.Recorded || c.SameAsRecorded
	}
	if !recShown {
		fmt.Fprintf(w, "%4s\n", "...")
		row(r.Recorded)
	}
	fmt.Fprintln(w)
	if len(r.NoEffect) > 0 {
		fmt.Fprintf(w, "changed nothing for this trace: %s\n", strings.Join(r.NoEffect, ", "))
	}
	for _, k := range r.NotTried {
		fmt.Fprintf(w, "not tried: %s\n", k)
	}
	for i, o := range r.OOMs {
		if i == 3 {
			fmt.Fprintf(w, "... %d more OOMs (--json lists them)\n", len(r.OOMs)-3)
			break
		}
		writeOOMVerdict(w, &o)
	}
	best, rec := r.Best, r.Recorded
	if r.Objective == "fit" {
		fmt.Fprintf(w, "needs %s with %s (recorded)", fitText(rec.FitBytes), rec.Label)
		if best.Conf != rec.Conf || !rec.Recorded {
			fmt.Fprintf(w, ", %s with %s", fitText(best.FitBytes), best.Label)
		}
		fmt.Fprintln(w)
		if r.Fits != nil {
			if *r.Fits {
				fmt.Fprintf(w, "fits in %s: yes, with %s\n", analysis.Bytes(r.LimitBytes), best.Label)
			} else {
				fmt.Fprintf(w, "fits in %s: no; the least any setting tried needs is %s\n", analysis.Bytes(r.LimitBytes), fitText(best.FitBytes))
			}
		}
	} else if best.Recorded {
		fmt.Fprintf(w, "the recorded settings are the best found\n")
	} else {
		fmt.Fprintf(w, "best: %s, peak reserved %s, %s vs recorded, %d OOMs (recorded %d)\n", best.Label,
			analysis.Bytes(best.PeakReservedBytes), bytesDelta(rec.PeakReservedBytes, best.PeakReservedBytes), best.OOMs, rec.OOMs)
	}
	fmt.Fprintln(w, r.AllocConfLine)
}

func fitText(n int64) string {
	if n < 0 {
		return "more than the device"
	}
	return analysis.Bytes(n).String()
}

// writeOOMVerdict prints one OOM of the recorded settings: what failed, why,
// who was live, what avoids it.
func writeOOMVerdict(w io.Writer, o *analysis.OOM) {
	fmt.Fprintf(w, "OOM at event %d: %s on stream %d\n", o.Seq, o.Request, o.Stream)
	switch o.Cause {
	case analysis.CauseLimit:
		fmt.Fprintf(w, "  the limit: %s live + %s asked > %s allowed\n", o.LiveBytes, o.Request, o.CapacityBytes)
	case analysis.CauseFragmentation:
		fmt.Fprintf(w, "  fragmentation: %s live + %s asked fit in %s, but the largest free block is %s (%s free beside live blocks)\n",
			o.LiveBytes, o.Request, o.CapacityBytes, o.LargestFreeStream, o.FreeBesideLiveBytes)
	}
	for i, s := range o.LiveSites {
		if i == 3 {
			break
		}
		fmt.Fprintf(w, "  %10s live in %d blocks at %s\n", s.BlockBytes, s.Count, s.Label())
	}
	if len(o.AvoidedBy) > 0 {
		names := make([]string, len(o.AvoidedBy))
		for i, a := range o.AvoidedBy {
			names[i] = cmp.Or(a, "defaults")
		}
		fmt.Fprintf(w, "  avoided by: %s\n", strings.Join(names, "; "))
	} else {
		fmt.Fprintf(w, "  no setting tried avoids it\n")
	}
}

// tunePlot draws the recorded run against the best three settings, ranked
// as the table ranks them.
func tunePlot(ctx context.Context, in *pipeline.Input, rep *tune.Report, path string) error {
	sums, err := tune.Summaries(ctx, in, rep, 3)
	if err != nil {
		return err
	}
	runs := make([]plots.Run, len(sums))
	for i, s := range sums {
		runs[i] = plots.Run{Label: s.Label, Summary: s.Summary}
	}
	popt := plots.Options{Title: "Reserved memory: the recorded run and the best settings tune found",
		ByEvent: plots.IdleDominated(runs[0].Summary)}
	p, err := plots.Compare(runs, popt)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return plots.Save(p, path)
}
