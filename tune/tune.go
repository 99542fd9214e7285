// Package tune finds the PYTORCH_CUDA_ALLOC_CONF under which a recorded
// run reserves the least memory, or needs the smallest GPU, by replaying
// its trace on the allocator model under many settings (see Search).
//
// The search is deterministic: the same trace and options give the same
// settings in the same order, whatever the number of cores. Replays run in
// passes (pass.go): one decoding of the trace feeds every replay of the
// pass, each on its own goroutine.
package tune

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/pipeline"
)

// Objective is what the search minimises.
type Objective int

const (
	// Reserved ranks settings by OOMs under the limit (fewest first), then
	// peak reserved bytes, then device mallocs and frees, then retries.
	Reserved Objective = iota
	// Fit ranks settings by the smallest per-process memory limit under
	// which the run has no OOM, then as Reserved does.
	Fit
)

func (o Objective) String() string {
	if o == Fit {
		return "fit"
	}
	return "reserved"
}

// Options configure Search.
type Options struct {
	Objective Objective
	// Limit is the per-process memory limit in bytes: with Reserved, every
	// replay runs under it (0 keeps the trace's recorded limit, <0 none);
	// with Fit, the memory the answer is checked against ("fits under
	// 24 GiB?"; 0 or <0 for no such question).
	Limit int64
	// Rounds bounds the rounds of coordinate descent after the first pass
	// (default 4); negative: the first pass only (each knob alone).
	Rounds int
	// Progress, when set, receives a line about each stage as it starts
	// and ends.
	Progress func(msg string)
}

// Candidate is one setting and what the replays under it did.
type Candidate struct {
	// Conf is the PYTORCH_CUDA_ALLOC_CONF a user sets, "" for PyTorch's
	// defaults; for the recorded settings, the recorded string.
	Conf     string
	Label    string // Conf, or "defaults"
	Recorded bool   // the settings the trace was recorded under
	Keys     int    // keys the setting sets
	// LimitBytes is the per-process limit the replay ran under, 0 for none
	// (with Fit, the replay without a limit).
	LimitBytes int64
	Outcome
	// FitBytes (Fit) is the smallest limit found under which the run has
	// no OOM, a multiple of the driver's 2 MiB granularity; -1 when even
	// the whole device is not enough.
	FitBytes int64
	// Same counts the other settings that did exactly the same (Distinct);
	// SameAsRecorded says the recorded settings are among them.
	Same           int
	SameAsRecorded bool

	pt    point // in the search space; recorded settings outside it: ok false
	inPts bool
}

// Setting is a setting to evaluate: PYTORCH_CUDA_ALLOC_CONF over
// PyTorch's defaults, and a limit (0 keeps the trace's, <0 none).
type Setting struct {
	Conf  string
	Limit int64
}

// Evaluate replays the input under each setting, in one pass, and returns
// a Candidate per setting, in order.
func Evaluate(ctx context.Context, in *pipeline.Input, sets []Setting) ([]Candidate, error) {
	e := &evaluator{in: in}
	jobs := make([]job, len(sets))
	cands := make([]Candidate, len(sets))
	for i, s := range sets {
		r, err := in.Resolve(pipeline.Settings{Conf: s.Conf, FromDefaults: true, Limit: s.Limit})
		if err != nil {
			return nil, err
		}
		jobs[i] = job{set: r}
		cands[i] = candidate(s.Conf, r)
	}
	outs, err := e.run(ctx, jobs)
	if err != nil {
		return nil, err
	}
	for i := range cands {
		cands[i].Outcome = outs[i]
	}
	return cands, nil
}

// candidate is the entry of conf, resolved as r, before its replays.
func candidate(conf string, r pipeline.Resolved) Candidate {
	c := Candidate{Conf: conf, Label: conf, Recorded: r.Recorded, LimitBytes: r.Limit}
	if conf == "" {
		c.Label = "defaults"
	}
	pc, err := allocator.ParseConf(conf)
	if err == nil {
		c.Keys = keysOf(pc)
	}
	return c
}

// sameConf reports whether two configurations set the same values.
func sameConf(a, b allocator.Conf) bool {
	a.Raw, b.Raw = "", ""
	return a == b
}

// keysOf counts the keys of c that differ from PyTorch's defaults.
func keysOf(c allocator.Conf) int {
	d := allocator.DefaultConf()
	n := 0
	for _, diff := range []bool{c.ExpandableSegments != d.ExpandableSegments, c.MaxSplitSize != d.MaxSplitSize,
		c.RoundupDivisions != d.RoundupDivisions, c.GCThreshold != d.GCThreshold,
		c.MaxNonSplitRounding != c.LargeSegmentSize, c.LargeSegmentSize != d.LargeSegmentSize,
		c.MemoryFraction != d.MemoryFraction, c.MinBlockSize != d.MinBlockSize} {
		if diff {
			n++
		}
	}
	return n
}

// searcher holds a Search's state.
type searcher struct {
	in      *pipeline.Input
	opts    Options
	e       evaluator
	limited bool                 // the replays run under a limit (Reserved) or search on it (Fit)
	limit   int64                // pipeline.Settings.Limit of every Reserved replay
	sp      space                // the knobs and their values
	tried   map[point]*Candidate // by point
	rec     *Candidate           // the recorded settings
	all     []*Candidate         // in order of evaluation
	start   time.Time
}

// Search replays the input under the recorded settings, PyTorch's defaults
// and every knob of knobs.go alone (with the recorded value of each among
// its values), then descends by coordinates from the
// best: each round tries every value of every knob with the others held at
// the best so far, until a round finds nothing better (at most
// Options.Rounds rounds). Combinations are reached that way, and a first
// guess at them, every knob at its best single value, is tried in the
// first round. Each stage is one pass over the trace (with Fit, one pass
// without a limit, then one per step of a bisection on the limit).
func Search(ctx context.Context, in *pipeline.Input, opts Options) (*Report, error) {
	if opts.Rounds == 0 {
		opts.Rounds = 4
	}
	s := &searcher{in: in, opts: opts, e: evaluator{in: in}, tried: map[point]*Candidate{}, start: time.Now()}
	s.e.progress = func(msg string) { s.progress("%s", msg) }
	rec, err := in.Resolve(pipeline.Settings{Limit: s.replayLimit()})
	if err != nil {
		return nil, err
	}
	s.limit = s.replayLimit()
	s.limited = opts.Objective == Fit || rec.Limit > 0
	s.sp = newSpace(rec.Conf)

	// Stage 1: the recorded settings, the defaults, each knob alone.
	pts := append([]point{{}}, s.sp.singles(s.limited)...)
	if err := s.eval(ctx, "each setting alone", pts, true); err != nil {
		return nil, err
	}
	best := s.bestPoint()
	for round := 1; round <= opts.Rounds; round++ {
		var next []point
		if round == 1 {
			next = append(next, s.combined())
		}
		next = append(next, s.sp.neighbours(best, s.limited)...)
		if err := s.eval(ctx, fmt.Sprintf("descent round %d from %s", round, cmp.Or(s.sp.conf(best), "defaults")), next, false); err != nil {
			return nil, err
		}
		nb := s.bestPoint()
		if nb == best {
			break
		}
		best = nb
	}
	return s.report(), nil
}

// replayLimit is the pipeline.Settings.Limit of a Reserved replay.
func (s *searcher) replayLimit() int64 {
	if s.opts.Objective == Fit {
		return -1
	}
	return s.opts.Limit
}

// eval evaluates the points not tried yet (and, withRecorded, the recorded
// settings) in one stage.
func (s *searcher) eval(ctx context.Context, stage string, pts []point, withRecorded bool) error {
	var cands []*Candidate
	var sets []pipeline.Resolved
	seen := map[point]bool{}
	for _, p := range pts {
		if s.tried[p] != nil || seen[p] {
			continue
		}
		seen[p] = true
		r, err := s.in.Resolve(pipeline.Settings{Conf: s.sp.conf(p), FromDefaults: true, Limit: s.limit})
		if err != nil {
			return err
		}
		c := candidate(s.sp.conf(p), r)
		c.pt, c.inPts = p, true
		cands = append(cands, &c)
		sets = append(sets, r)
	}
	if withRecorded {
		r, err := s.in.Resolve(pipeline.Settings{Limit: s.limit})
		if err != nil {
			return err
		}
		// The recorded settings are a point of the space when some point
		// resolves to them: that point's entry is theirs.
		found := false
		for i, c := range cands {
			if sameConf(sets[i].Conf, r.Conf) {
				c.Recorded, found = true, true
				s.rec = c
				sets[i] = r // replayed as recorded: with the recording's addresses
			}
		}
		if !found {
			c := candidate(s.in.Meta.AllocConf, r)
			c.Recorded = true
			cands = append(cands, &c)
			sets = append(sets, r)
			s.rec = cands[len(cands)-1]
		}
	}
	if len(cands) == 0 {
		return nil
	}
	s.progress("%s: %d settings", stage, len(cands))
	var err error
	if s.opts.Objective == Fit {
		err = s.fit(ctx, cands, sets)
	} else {
		var outs []Outcome
		jobs := make([]job, len(sets))
		for i, r := range sets {
			jobs[i] = job{set: r}
		}
		if outs, err = s.e.run(ctx, jobs); err == nil {
			for i, c := range cands {
				c.Outcome = outs[i]
			}
		}
	}
	if err != nil {
		return err
	}
	for _, c := range cands {
		if c.inPts {
			s.tried[c.pt] = c
		}
		s.all = append(s.all, c)
	}
	return nil
}

func (s *searcher) progress(format string, args ...any) {
	if s.opts.Progress != nil {
		s.opts.Progress(fmt.Sprintf("tune: %.1f s, %d replays done: ", time.Since(s.start).Seconds(), s.e.replays) + fmt.Sprintf(format, args...))
	}
}

// bestPoint is the best-ranked point tried so far.
func (s *searcher) bestPoint() point {
	var best *Candidate
	for _, c := range s.all {
		if c.inPts && (best == nil || less(s.opts.Objective, c, best) < 0) {
			best = c
		}
	}
	return best.pt
}

// combined is every knob at its best value when set alone, where that
// beat the defaults: the first guess at a combination.
func (s *searcher) combined() point {
	def := s.tried[point{}]
	var p point
	for k, kn := range s.sp {
		bestV, best := uint8(0), def
		for v := 1; v < len(kn.values); v++ {
			if c := s.tried[(point{}).with(k, uint8(v))]; c != nil && less(s.opts.Objective, c, best) < 0 {
				bestV, best = uint8(v), c
			}
		}
		if q := p.with(k, bestV); s.sp.valid(q) {
			p = q
		}
	}
	return p
}

// report ranks what was tried and names the knobs that did nothing.
func (s *searcher) report() *Report {
	r := &Report{Objective: s.opts.Objective, Replays: s.e.replays, Passes: s.e.passes}
	switch {
	case s.opts.Objective == Fit && s.opts.Limit > 0:
		r.LimitBytes = s.opts.Limit
	case s.opts.Objective == Reserved:
		r.LimitBytes = s.rec.LimitBytes
	}
	for _, c := range s.all {
		r.Ranked = append(r.Ranked, *c)
	}
	Rank(s.opts.Objective, r.Ranked)
	r.Recorded = *s.rec
	for k, kn := range s.sp {
		if kn.needsLimit && !s.limited {
			r.NotTried = append(r.NotTried, kn.key+" (needs a memory limit: --limit)")
			continue
		}
		compared, differs := 0, false
		for p, c := range s.tried {
			if p[k] == 0 {
				continue
			}
			if base := s.tried[p.with(k, 0)]; base != nil {
				compared++
				if !c.sameAs(&base.Outcome) || c.FitBytes != base.FitBytes {
					differs = true
				}
			}
		}
		if compared > 0 && !differs {
			r.NoEffect = append(r.NoEffect, kn.key)
		}
	}
	s.progress("finished: %d settings in %d passes", len(r.Ranked), r.Passes)
	return r
}
