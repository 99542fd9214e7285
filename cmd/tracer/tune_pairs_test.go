package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/tune"
)

var updateTune = flag.Bool("update-tune", false, "write the README's tune reality-check table from this run")

// pairCandidate is a Candidate of one device's memory_stats(), so that
// tune.Rank orders real runs and predictions alike.
func pairCandidate(conf string, peak, ooms, mallocs, frees, retries int64) tune.Candidate {
	c := tune.Candidate{Conf: conf, Label: conf}
	c.PeakReservedBytes, c.OOMs, c.DeviceMallocs, c.DeviceFrees, c.Retries = peak, ooms, mallocs, frees, retries
	if pc, err := allocator.ParseConf(conf); err == nil {
		c.Keys = len(strings.Split(pc.String(), ","))
		if pc.String() == "" {
			c.Keys = 0
		}
	}
	return c
}

// TestTunePairs checks tune against reality: on the pairs of real runs
// (testdata/pairs), every run is tune's input in turn, and tune evaluates
// the settings of the program's other runs, each with its run's limit. The
// peak reserved bytes it predicts must equal the real run's, and the
// setting it ranks best among them must be the one that really was best
// (ranked alike: OOMs, peak reserved, device calls, retries). Pairs whose
// requests differ (the program asked for other memory) are skipped; a miss
// that the real run's segment addresses make exact is counted as
// "addresses" (where the CUDA driver puts segments decides best fit's
// ties, allocator/ADDRESSES.md).
func TestTunePairs(t *testing.T) {
	if testing.Short() {
		t.Skip("imports and replays every pair")
	}
	byProgram := loadPairRuns(t)
	programs := make([]string, 0, len(byProgram))
	for p := range byProgram {
		programs = append(programs, p)
	}
	slices.Sort(programs)
	var table strings.Builder
	table.WriteString("| program | settings | peak reserved equal | misses (why) | tune's best = real best |\n|---|---|---|---|---|\n")
	var skipped, compared, equal, missed, bestRight, bestRuns int
	for _, p := range programs {
		runs := byProgram[p]
		var pCompared, pEqual, pBest, pRuns int
		whys := map[string]int{}
		for _, a := range runs {
			in, err := pipeline.Open(a.trace)
			if err != nil {
				t.Fatal(err)
			}
			sets := make([]tune.Setting, len(runs))
			for i, b := range runs {
				sets[i] = tune.Setting{Conf: b.conf, Limit: b.limit}
				if b.limit == 0 {
					sets[i].Limit = -1
				}
			}
			cands, err := tune.Evaluate(context.Background(), in, sets)
			if err != nil {
				t.Fatalf("%s %s: %v", p, a.tag, err)
			}
			var predicted, real []tune.Candidate
			for i, b := range runs {
				if !sameRequests(a.requests, b.requests) {
					skipped++
					continue
				}
				var st *allocator.Stats
				for k := range cands[i].Devices {
					if cands[i].Devices[k].Device == a.device {
						st = &cands[i].Devices[k].Stats
					}
				}
				if st == nil {
					t.Fatalf("%s %s → %s: no device %d in the replay", p, a.tag, b.tag, a.device)
				}
				got, want := st.ReservedBytes[0].Peak, b.stats["reserved_bytes.all.peak"]
				compared++
				pCompared++
				switch {
				case got == want:
					equal++
					pEqual++
				default:
					if stats, _ := withAddresses(t, a, b, followsFreeOrder); stats {
						missed++
						whys["addresses"]++
						break
					}
					t.Errorf("%s %s → %s: tune predicts a peak of %d bytes, the real run reserved %d", p, a.tag, b.tag, got, want)
				}
				predicted = append(predicted, pairCandidate(b.tag, got, st.NumOOMs, st.NumDeviceAlloc, st.NumDeviceFree, st.NumAllocRetries))
				predicted[len(predicted)-1].Conf = b.conf
				real = append(real, pairCandidate(b.conf, want, b.stats["num_ooms"], b.stats["num_device_alloc"], b.stats["num_device_free"], b.stats["num_alloc_retries"]))
				real[len(real)-1].Label = b.tag
			}
			if len(predicted) < 2 {
				continue
			}
			tune.Rank(tune.Reserved, predicted)
			tune.Rank(tune.Reserved, real)
			// Tune's best is right when the real run under it did as well
			// as the real best: the same OOMs, peak, device calls, retries.
			bestRuns++
			pRuns++
			var underBest tune.Candidate
			for _, r := range real {
				if r.Label == predicted[0].Label {
					underBest = r
				}
			}
			r0 := real[0]
			if underBest.OOMs == r0.OOMs && underBest.PeakReservedBytes == r0.PeakReservedBytes &&
				underBest.DeviceCalls() == r0.DeviceCalls() && underBest.Retries == r0.Retries {
				bestRight++
				pBest++
			} else {
				t.Errorf("%s, from %s: tune ranks %s best (predicted peak %d), the real best was %s (peak %d; %s really reserved %d)",
					p, a.tag, predicted[0].Label, predicted[0].PeakReservedBytes, r0.Label, r0.PeakReservedBytes, predicted[0].Label, underBest.PeakReservedBytes)
			}
		}
		var ws []string
		for w, n := range whys {
			ws = append(ws, fmt.Sprintf("%d (%s)", n, w))
		}
		slices.Sort(ws)
		fmt.Fprintf(&table, "| %s | %d | %d of %d | %s | %d of %d |\n", p, len(runs), pEqual, pCompared, cmpOr(strings.Join(ws, ", "), "–"), pBest, pRuns)
	}
	summary := fmt.Sprintf("%d of %d predicted peaks equal to the real run's (%d pairs skipped: their requests differ); tune's best among the recorded settings really was the best from %d of %d runs.\n\n",
		equal, compared, skipped, bestRight, bestRuns)
	t.Logf("%s%s", summary, table.String())
	if skipped == compared+skipped || equal == 0 {
		t.Fatal("nothing compared")
	}
	syncReadmeSection(t, "tune", summary+table.String(), *updateTune)
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// syncReadmeSection checks that the README's text between its
// "<!-- NAME:begin" and "<!-- NAME:end -->" marks is text, or writes it
// there with update.
func syncReadmeSection(t *testing.T, name, text string, update bool) {
	t.Helper()
	const path = "../../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all := string(raw)
	begin := strings.Index(all, "<!-- "+name+":begin")
	end := strings.Index(all, "<!-- "+name+":end -->")
	if begin < 0 || end < begin {
		t.Fatalf("README.md has no %s:begin/%s:end marks", name, name)
	}
	begin += strings.Index(all[begin:], "\n") + 1
	if update {
		if err := os.WriteFile(path, []byte(all[:begin]+text+all[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := all[begin:end]; got != text {
		t.Errorf("README.md's %s table differs (go test ./cmd/tracer -run TunePairs -update-tune):\n%s", name, lineDiff(got, text))
	}
}
