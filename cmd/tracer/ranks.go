package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
)

// Several traces given to info, analyze or replay (the ranks of one
// distributed run, or a folder of them) are reported side by side, one
// row per rank (analysis.RankTable), each trace worked on as it would be
// alone.

// rankOf is in's rank for the per-trace JSON of several traces:
// analysis.NoRank (-1) when unknown. (A single trace's JSON has none.)
func rankOf(in *pipeline.Input) *int {
	r := in.Rank()
	return &r
}

// rankRows are the rows of one trace's summaries, one per device.
func rankRows(in *pipeline.Input, sums []*analysis.Summary) []analysis.RankRow {
	rows := make([]analysis.RankRow, len(sums))
	for i, s := range sums {
		rows[i] = analysis.RankRowOf(in.Name, in.Rank(), s)
	}
	return rows
}

// lockedWriter serialises the writes of traces worked on at once (their
// warnings).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// infoRanksJSON is the --json contract of tracer info with several traces.
type infoRanksJSON struct {
	Ranks  analysis.RankTable `json:"ranks"`
	Traces []*infoJSON        `json:"traces"`
}

func runInfoRanks(ctx context.Context, opts *infoOptions) error {
	out := &infoRanksJSON{Traces: make([]*infoJSON, len(opts.Paths))}
	rows := make([][]analysis.RankRow, len(opts.Paths))
	errw := &lockedWriter{w: opts.Err}
	err := pipeline.Each(ctx, len(opts.Paths), func(ctx context.Context, i int) error {
		in, run, j, err := infoOf(ctx, opts.Paths[i], analysis.Options{}, warnTo(errw))
		if err != nil {
			return err
		}
		j.Trace, j.Rank = in.Name, rankOf(in)
		out.Traces[i], rows[i] = j, rankRows(in, run.Summaries)
		return nil
	})
	if err != nil {
		return err
	}
	var all []analysis.RankRow
	for _, r := range rows {
		all = append(all, r...)
	}
	out.Ranks = analysis.Ranks(all)
	if opts.JSON {
		return writeJSON(opts.Out, out)
	}
	if err := analysis.WriteRanks(opts.Out, out.Ranks); err != nil {
		return err
	}
	for _, j := range out.Traces {
		if j.Mismatches > 0 {
			fmt.Fprintf(opts.Out, "%s: %d events differ from the recording when replayed under its settings\n", j.Trace, j.Mismatches)
		}
		if j.PeaksLowerBound {
			fmt.Fprintf(opts.Out, "%s: its history starts mid-run: peaks are lower bounds of the run's\n", j.Trace)
		}
		if j.Approximate {
			fmt.Fprintf(opts.Out, "%s: approximate: %s\n", j.Trace, j.ApproximateReason)
		}
		for _, w := range j.Warnings {
			fmt.Fprintf(opts.Out, "warning: %s: %s\n", j.Trace, w)
		}
	}
	return nil
}

// analyzeRankJSON is one trace of tracer analyze --json with several.
type analyzeRankJSON struct {
	Trace   string              `json:"trace"`
	Rank    int                 `json:"rank"` // -1 when unknown
	How     string              `json:"how"`
	Devices []*analysis.Summary `json:"devices"`
}

// analyzeRanksJSON is the --json contract of tracer analyze with several
// traces.
type analyzeRanksJSON struct {
	Ranks  analysis.RankTable `json:"ranks"`
	Traces []analyzeRankJSON  `json:"traces"`
}

// runAnalyzeRanks prints the table by rank, then the whole analysis of
// the rank whose reserved peak is highest: the one to look at first.
func runAnalyzeRanks(ctx context.Context, opts *analyzeOptions) error {
	out := &analyzeRanksJSON{Traces: make([]analyzeRankJSON, len(opts.Paths))}
	errw := &lockedWriter{w: opts.Err}
	rows := make([][]analysis.RankRow, len(opts.Paths))
	err := pipeline.Each(ctx, len(opts.Paths), func(ctx context.Context, i int) error {
		in, err := pipeline.Open(opts.Paths[i])
		if err != nil {
			return err
		}
		in.Warn = warnTo(errw)
		sums, how, err := summarize(ctx, in, opts.Conf, opts.Round, opts.Limit, opts.analysisOptions())
		if err != nil {
			return err
		}
		if opts.JSON && !opts.Timeline {
			for _, s := range sums {
				s.Timeline = analysis.Timeline{}
			}
		}
		out.Traces[i] = analyzeRankJSON{Trace: in.Name, Rank: in.Rank(), How: how, Devices: sums}
		rows[i] = rankRows(in, sums)
		return nil
	})
	if err != nil {
		return err
	}
	var all []analysis.RankRow
	for _, r := range rows {
		all = append(all, r...)
	}
	out.Ranks = analysis.Ranks(all)
	if opts.JSON {
		return writeJSON(opts.Out, out)
	}
	hows := map[string]bool{}
	for _, t := range out.Traces {
		hows[t.How] = true
	}
	if len(hows) == 1 {
		fmt.Fprintf(opts.Out, "%d traces (%s)\n", len(out.Traces), out.Traces[0].How)
	}
	if err := analysis.WriteRanks(opts.Out, out.Ranks); err != nil {
		return err
	}
	if len(all) == 0 {
		return nil
	}
	top := out.Ranks.Rows[out.Ranks.Reserved.Highest]
	for _, t := range out.Traces {
		for _, s := range t.Devices {
			if t.Trace == top.Trace && s.Device == top.Device {
				fmt.Fprintf(opts.Out, "\nthe highest reserved peak: %s (%s)\n", t.Trace, t.How)
				return analysis.WriteTextOptions(opts.Out, s, analysis.TextOptions{Top: opts.Top, FullStacks: opts.Full})
			}
		}
	}
	return nil
}

// replayRanksJSON is the --json contract of tracer replay with several
// traces: the table by rank as recorded and as replayed, and each trace's
// replay as tracer replay TRACE --json reports it.
type replayRanksJSON struct {
	Recorded analysis.RankTable `json:"recorded"`
	Replayed analysis.RankTable `json:"replayed"`
	Traces   []*replayJSON      `json:"traces"`
}

// runReplayRanks replays every trace under the same settings (each over
// its own recorded ones) and prints, rank by rank, the recorded and
// replayed peaks.
func runReplayRanks(ctx context.Context, opts *replayOptions) error {
	if opts.Output != "" || opts.Device != "sim" {
		return usagef("-o and --device cuda take one trace; %d given", len(opts.Paths))
	}
	s, err := parseSettings(opts.Conf, opts.Round, opts.Limit)
	if err != nil {
		return err
	}
	s.FromDefaults = opts.FromDefaults
	out := &replayRanksJSON{Traces: make([]*replayJSON, len(opts.Paths))}
	errw := &lockedWriter{w: opts.Err}
	recRows := make([][]analysis.RankRow, len(opts.Paths))
	gotRows := make([][]analysis.RankRow, len(opts.Paths))
	err = pipeline.Each(ctx, len(opts.Paths), func(ctx context.Context, i int) error {
		in, err := pipeline.Open(opts.Paths[i])
		if err != nil {
			return err
		}
		in.Warn = warnTo(errw)
		want, err := in.Resolve(s)
		if err != nil {
			return err
		}
		base, err := in.RecordedSettings()
		if err != nil {
			return err
		}
		popts := pipeline.Options{}
		j, rec, got, _, err := replayCompared(ctx, in, want, base, &popts, false, nil)
		if err != nil {
			return err
		}
		j.Rank = rankOf(in)
		out.Traces[i], recRows[i], gotRows[i] = j, rankRows(in, rec.Summaries), rankRows(in, got.Summaries)
		return nil
	})
	if err != nil {
		return err
	}
	var rec, got []analysis.RankRow
	for i := range recRows {
		rec, got = append(rec, recRows[i]...), append(got, gotRows[i]...)
	}
	out.Recorded, out.Replayed = analysis.Ranks(rec), analysis.Ranks(got)
	if opts.JSON {
		return writeJSON(opts.Out, out)
	}
	labels := map[string]bool{}
	for _, j := range out.Traces {
		labels[j.Settings["replayed"].Label] = true
	}
	if len(labels) == 1 {
		fmt.Fprintf(opts.Out, "%d traces replayed under: %s\n", len(out.Traces), out.Traces[0].Settings["replayed"].Label)
	}
	if err := analysis.WriteRankChange(opts.Out, out.Recorded, out.Replayed); err != nil {
		return err
	}
	for _, j := range out.Traces {
		rs, ps := j.Settings["recorded"], j.Settings["replayed"]
		switch {
		case j.LimitNote != "":
			fmt.Fprintf(opts.Out, "%s: %s\n", j.Trace, j.LimitNote)
		case j.LimitFilledIn:
			fmt.Fprintf(opts.Out, "%s: with the limit filled in, the replay reproduces every recorded event\n", j.Trace)
		case ps.Label == rs.Label && j.Mismatches > 0:
			fmt.Fprintf(opts.Out, "warning: %s: the model differs from the recording at %d events\n", j.Trace, j.Mismatches)
		}
		for _, d := range j.Devices {
			for _, o := range d.OOMs {
				if !o.Recorded {
					fmt.Fprintf(opts.Out, "%s: new OOM at event %d: %s on stream %d\n", j.Trace, o.Seq, analysis.Bytes(o.Size), o.Stream)
					break
				}
			}
		}
	}
	return nil
}
