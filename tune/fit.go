package tune

import (
	"context"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
)

// fitUnit is the step of the search on the limit: the CUDA driver's 2 MiB
// granularity. Every segment and mapped page is a multiple of it, so
// reserved bytes are too, and a limit works exactly when its round-down to
// a multiple does.
const fitUnit = 2 << 20

// bisect is the search on the limit of one setting: fail is a limit under
// which the run has an OOM (or 0), ok one under which it has none, once
// checked.
type bisect struct {
	fail, ok int64
	checked  bool
	done     bool
	total    int64 // the device's memory: no limit above it helps
}

// next is the limit to try, or 0 when the search is over.
func (b *bisect) next() int64 {
	switch {
	case b.done:
		return 0
	case !b.checked:
		return b.ok
	case b.ok-b.fail <= fitUnit:
		b.done = true
		return 0
	}
	return b.fail + (b.ok-b.fail)/fitUnit/2*fitUnit
}

// saw records the replay under limit.
func (b *bisect) saw(limit int64, ooms int64) {
	switch {
	case ooms == 0:
		b.ok, b.checked = limit, true
	case limit == b.ok && !b.checked:
		// Not enough after all (garbage collection under the limit can
		// change the run): look higher.
		b.fail = b.ok
		if b.ok >= b.total {
			b.done = true
			return
		}
		b.ok = min(roundUp(2*b.ok), b.total)
	default:
		b.fail = limit
	}
}

func roundUp(n int64) int64   { return (n + fitUnit - 1) / fitUnit * fitUnit }
func roundDown(n int64) int64 { return n / fitUnit * fitUnit }

// fit finds, for each candidate, the smallest limit under which its run
// has no OOM. A pass without a limit gives the bounds: under a limit below
// the allocated peak the run fails; under its reserved peak the limit is
// never reached and the run is the unlimited one, which has no OOM, unless
// garbage collection (which acts on the limit) changes it, so that bound is
// checked. The candidates' bisections then share passes, one step each.
// An OOM-free run is not monotone in the limit in general; the bisection
// reports the smallest limit it found with none, each one replayed.
func (s *searcher) fit(ctx context.Context, cands []*Candidate, sets []pipeline.Resolved) error {
	jobs := make([]job, len(sets))
	for i, r := range sets {
		// Without a limit: the recorded settings replay as recorded (with
		// the recording's addresses and its releases) only if the run had
		// none either.
		r.Limit, r.Recorded = 0, r.Recorded && s.in.Meta.MemoryLimit == 0
		jobs[i] = job{set: r}
	}
	outs, err := s.e.run(ctx, jobs)
	if err != nil {
		return err
	}
	bs := make([]bisect, len(cands))
	for i, c := range cands {
		c.Outcome = outs[i]
		c.LimitBytes = 0
		b := &bs[i]
		b.total = sets[i].Total
		if c.OOMs > 0 {
			// Short of memory on the whole device, with no limit.
			c.FitBytes, b.done = -1, true
			continue
		}
		b.fail = roundDown(max(c.PeakAllocatedBytes-1, 0))
		b.ok = roundUp(c.PeakReservedBytes)
		b.checked = sets[i].Conf.GCThreshold == 0
	}
	for step := 1; ; step++ {
		var probes []job
		var idx []int
		for i := range bs {
			if l := bs[i].next(); l > 0 {
				r := sets[i]
				r.Limit, r.Recorded, r.FillsLimit = l, false, false
				r.Label += ", limit " + analysis.Bytes(l).String()
				probes = append(probes, job{set: r})
				idx = append(idx, i)
			}
		}
		if len(probes) == 0 {
			break
		}
		s.progress("bisection on the limit, step %d: %d settings", step, len(probes))
		outs, err := s.e.run(ctx, probes)
		if err != nil {
			return err
		}
		for k, i := range idx {
			bs[i].saw(probes[k].set.Limit, outs[k].OOMs)
		}
	}
	for i, c := range cands {
		if c.FitBytes == 0 {
			c.FitBytes = bs[i].ok
			if !bs[i].checked {
				c.FitBytes = -1
			}
		}
	}
	return nil
}
