package tune

import (
	"cmp"
	"slices"

	"github.com/tracer-dev/tracer/allocator"
)

// Report is the outcome of a Search.
type Report struct {
	Objective  Objective
	LimitBytes int64 // as Options.Limit, resolved: the replays' limit (Reserved) or the memory asked about (Fit); 0 for none
	// Ranked holds every setting tried, best first.
	Ranked []Candidate
	// Recorded is the recorded settings' entry (also in Ranked).
	Recorded Candidate
	// NoEffect names the knobs that changed nothing for this trace: every
	// setting tried with one of their values gave the same counters, on
	// every device, as the same setting without it.
	NoEffect []string
	// NotTried names knobs the search left out, with why.
	NotTried []string
	Replays  int
	Passes   int
}

// Distinct returns Ranked with each group of settings that did exactly the
// same (every counter on every device, and the fit) folded into its best
// ranked member, the one with fewest keys, which counts the others in
// Same: a table then shows what differs, not the useless keys of the
// best setting's equals.
func (r *Report) Distinct() []Candidate {
	var out []Candidate
	for _, c := range r.Ranked {
		folded := false
		for i := range out {
			if out[i].sameAs(&c.Outcome) && out[i].FitBytes == c.FitBytes {
				if !pasteable(&out[i]) && pasteable(&c) {
					// A row names a setting PyTorch takes where it can.
					c.Same, c.SameAsRecorded = out[i].Same, out[i].Recorded
					out[i], c = c, out[i]
				}
				out[i].Same++
				out[i].SameAsRecorded = out[i].SameAsRecorded || c.Recorded
				folded = true
				break
			}
		}
		if !folded {
			c.Same, c.SameAsRecorded = 0, false
			out = append(out, c)
		}
	}
	return out
}

// Best is the recommended setting: the first of Ranked that PyTorch
// accepts (recorded settings may hold tracer's own model constants, such
// as tracer_round, which no PyTorch run can set).
func (r *Report) Best() *Candidate {
	for i := range r.Ranked {
		if pasteable(&r.Ranked[i]) {
			return &r.Ranked[i]
		}
	}
	return &r.Ranked[0]
}

// pasteable reports whether PyTorch accepts c's setting.
func pasteable(c *Candidate) bool {
	_, err := allocator.ParseConf(c.Conf)
	return err == nil
}

// Line is the line to paste into the environment of the run.
func (r *Report) Line() string { return "PYTORCH_CUDA_ALLOC_CONF=" + r.Best().Conf }

// AvoidedBy names (by Conf, "" for the defaults) up to n of the
// best-ranked settings under which the request at seq (a failed one) does
// not fail: those with no OOM at all first, then those that fail
// elsewhere; of settings that did exactly the same, the first (Distinct).
// With Fit, the settings that fit in the memory asked about (LimitBytes).
func (r *Report) AvoidedBy(seq int64, n int) []string {
	out := []string{}
	distinct := r.Distinct()
	if r.Objective == Fit {
		// The settings that fit in the memory asked about: under it their
		// runs have no OOM at all.
		for i := range distinct {
			c := &distinct[i]
			if len(out) < n && c.FitBytes > 0 && c.FitBytes <= r.LimitBytes && pasteable(c) {
				out = append(out, c.Conf)
			}
		}
		return out
	}
	for _, clean := range []bool{true, false} {
		for i := range distinct {
			c := &distinct[i]
			// A setting's failures are known when it had few enough that
			// OOMSeqs names them all.
			known := int64(len(c.OOMSeqs)) == c.OOMs
			if len(out) < n && (c.OOMs == 0) == clean && known && !c.failsAt(seq) && pasteable(c) {
				out = append(out, c.Conf)
			}
		}
	}
	return out
}

// less is the ranking: a before b.
func less(obj Objective, a, b *Candidate) int {
	if obj == Fit {
		fa, fb := a.FitBytes, b.FitBytes
		if fa < 0 {
			fa = 1 << 62
		}
		if fb < 0 {
			fb = 1 << 62
		}
		if c := cmp.Compare(fa, fb); c != 0 {
			return c
		}
	}
	return cmp.Or(
		cmp.Compare(a.OOMs, b.OOMs),
		cmp.Compare(a.PeakReservedBytes, b.PeakReservedBytes),
		cmp.Compare(a.DeviceCalls(), b.DeviceCalls()),
		cmp.Compare(a.Retries, b.Retries),
		cmp.Compare(a.Keys, b.Keys),
		cmp.Compare(a.Conf, b.Conf),
	)
}

// Rank sorts cands best first, as Search ranks its settings.
func Rank(obj Objective, cands []Candidate) {
	slices.SortStableFunc(cands, func(a, b Candidate) int { return less(obj, &a, &b) })
}
