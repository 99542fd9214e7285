package tune

import (
	"context"
	"fmt"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/replay"
)

// replayAnalyzed replays the input under c's setting (the recorded
// settings for the recorded entry) and limit (bytes, 0 for none), with the
// analysis.
func replayAnalyzed(ctx context.Context, in *pipeline.Input, c *Candidate, limit int64) (*pipeline.Run, error) {
	s := pipeline.Settings{Conf: c.Conf, FromDefaults: true, Limit: limit}
	if c.Recorded {
		s.Conf, s.FromDefaults = "", false
	}
	if s.Limit == 0 {
		s.Limit = -1
	}
	r, err := in.Resolve(s)
	if err != nil {
		return nil, err
	}
	return pipeline.Replay(ctx, in, r, pipeline.Options{})
}

// OOMVerdicts replays the recorded settings under the report's limit and
// returns the verdict on each of their OOMs (analysis.OOM), with Seq the
// failed request's place in the trace and AvoidedBy the report's settings
// under which it does not fail; [] when they had none. With Fit, that is
// the memory asked about, when the recorded settings need more.
func OOMVerdicts(ctx context.Context, in *pipeline.Input, rep *Report) ([]analysis.OOM, error) {
	ooms := []analysis.OOM{}
	limit := rep.Recorded.LimitBytes
	if rep.Objective == Fit {
		limit = rep.LimitBytes
		if fit := rep.Recorded.FitBytes; limit <= 0 || fit > 0 && fit <= limit {
			return ooms, nil
		}
	} else if rep.Recorded.OOMs == 0 {
		return ooms, nil
	}
	run, err := replayAnalyzed(ctx, in, &rep.Recorded, limit)
	if err != nil {
		return nil, err
	}
	for _, s := range run.Summaries {
		FillAvoidedBy(rep, s, run)
		ooms = append(ooms, s.OOMs...)
	}
	return ooms, nil
}

// FillAvoidedBy sets the AvoidedBy of each OOM of sum, a summary of the
// trace as recorded (run nil) or of run, a replay of it: up to three of the
// report's settings under which its request does not fail. A summary of a
// replay numbers events as the replay emitted them; the replay's OOMs, in
// the same order, name the requests in the trace, and their Seq replaces
// the summary's.
func FillAvoidedBy(rep *Report, sum *analysis.Summary, run *pipeline.Run) {
	var reqs []replay.OOM
	if run != nil {
		for _, d := range run.Result.Devices {
			if d.Device == sum.Device {
				reqs = d.OOMs
			}
		}
	}
	for i := range sum.OOMs {
		o := &sum.OOMs[i]
		if run != nil {
			if i >= len(reqs) {
				break
			}
			o.Seq = reqs[i].Seq
		}
		o.AvoidedBy = rep.AvoidedBy(o.Seq, 3)
	}
}

// Labelled is a summary and the setting it is of.
type Labelled struct {
	Label   string
	Summary *analysis.Summary
}

// Summaries replays the recorded settings and the n best other settings
// of the report (one per row of Distinct), as the report ran them, and
// returns the first device's summary of each, labelled, for the compare
// plot.
func Summaries(ctx context.Context, in *pipeline.Input, rep *Report, n int) ([]Labelled, error) {
	rec, err := replayAnalyzed(ctx, in, &rep.Recorded, rep.Recorded.LimitBytes)
	if err != nil {
		return nil, err
	}
	if len(rec.Summaries) == 0 {
		return nil, fmt.Errorf("%s: no events", in.Name)
	}
	out := []Labelled{{Label: "recorded (" + rep.Recorded.Label + ")", Summary: rec.Summaries[0]}}
	distinct := rep.Distinct()
	for i := 0; i < len(distinct) && len(out) <= n; i++ {
		c := &distinct[i]
		if c.Recorded {
			continue
		}
		run, err := replayAnalyzed(ctx, in, c, c.LimitBytes)
		if err != nil {
			return nil, err
		}
		if len(run.Summaries) > 0 {
			out = append(out, Labelled{Label: fmt.Sprintf("#%d %s", i+1, c.Label), Summary: run.Summaries[0]})
		}
	}
	return out, nil
}
