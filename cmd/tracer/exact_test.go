package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/trace"
)

// readTruth returns the torch.cuda.memory_stats() PyTorch reported at the
// end of the snapshot's run, with the run's settings (.stats.json).
func readTruth(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(snapshots, name+".stats.json"))
	if err != nil {
		t.Fatal(err)
	}
	var truth map[string]any
	if err := json.Unmarshal(raw, &truth); err != nil {
		t.Fatal(err)
	}
	return truth
}

// importSnapshot imports the snapshot name into dir, with args added.
func importSnapshot(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out := filepath.Join(dir, name+".arrows")
	args = append([]string{"import", filepath.Join(snapshots, name+".pickle"), "-o", out}, args...)
	if code, _, stderr := tracer(t, args...); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	return out
}

// sameStats checks that every memory_stats() key of got that PyTorch
// reported has PyTorch's value, and returns how many it checked.
func sameStats(t *testing.T, what string, got map[string]int64, truth map[string]any) int {
	t.Helper()
	n := 0
	for k, v := range got {
		want, ok := truth[k].(float64)
		if !ok {
			continue
		}
		n++
		if v != int64(want) {
			t.Errorf("%s: %s = %d, memory_stats() says %d", what, k, v, int64(want))
		}
	}
	if n < 10 {
		t.Errorf("%s: only %d keys compared", what, n)
	}
	return n
}

// TestWhatIfKeepsEmptyCache: a replay under settings other than the
// recorded ones performs the program's empty_cache() calls (the import's
// empty_cache rows), not a new guess from the recorded releases. A limit
// far above the run's peak never binds, so such a replay of the
// empty_cache snapshot must make PyTorch's 109 device mallocs and 105
// frees (a guess from the releases made 34 and 30), and every other
// counter PyTorch reported; the identity replay stays exact.
func TestWhatIfKeepsEmptyCache(t *testing.T) {
	const name = "empty_cache__default"
	truth := readTruth(t, name)
	out := importSnapshot(t, t.TempDir(), name)
	in, err := pipeline.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	s, err := in.Resolve(pipeline.Settings{Limit: 64 << 30})
	if err != nil {
		t.Fatal(err)
	}
	s.FillsLimit = false // replayed as another setting: no comparison, no recorded addresses
	run, err := pipeline.Replay(context.Background(), in, s, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := run.Result.Devices[0]
	if d.EmptyCaches != 4 {
		t.Errorf("%d empty_cache calls replayed, want the run's 4 (num_sync_all_streams)", d.EmptyCaches)
	}
	sameStats(t, "what-if replay", d.Stats.Map(), truth)

	var r replayJSON
	tracerJSON(t, &r, "replay", out, "--json")
	if !r.Reproduced || r.Mismatches != 0 {
		t.Errorf("identity replay: reproduced %v, %d mismatches", r.Reproduced, r.Mismatches)
	}
	sameStats(t, "identity replay", r.Replayed, truth)

	// A trace without the rows (an older import) still replays exactly
	// under its recorded settings, the calls inferred as it goes.
	old := filepath.Join(t.TempDir(), "old.arrows")
	rewrite(t, out, old, func(m *trace.Meta, evs []trace.Event) []trace.Event {
		m.EmptyCacheRows = false
		var kept []trace.Event
		for _, ev := range evs {
			if ev.Kind != trace.KindEmptyCache {
				kept = append(kept, ev)
			}
		}
		if len(kept) != len(evs)-4 {
			t.Fatalf("%d empty_cache rows, want 4", len(evs)-len(kept))
		}
		return kept
	})
	r = replayJSON{}
	tracerJSON(t, &r, "replay", old, "--json")
	if !r.Reproduced {
		t.Errorf("identity replay of the trace without rows: reproduced %v, %d mismatches", r.Reproduced, r.Mismatches)
	}
	sameStats(t, "identity replay without rows", r.Replayed, truth)
}

// TestReplayFillsLimit: snapshots do not store the run's memory limit.
// Imported without --fraction, a snapshot replayed with --limit at the
// run's own limit (floor(fraction × total memory)) is its recorded
// settings filled in: the replay compares itself with the recording,
// reproduces it, says so, and reports every memory_stats() counter
// PyTorch reported.
func TestReplayFillsLimit(t *testing.T) {
	dir := t.TempDir()
	tried := 0
	for _, name := range snapshotNames(t) {
		truth := readTruth(t, name)
		frac, ok := truth["fraction"].(string)
		if !ok {
			continue
		}
		tried++
		t.Run(name, func(t *testing.T) {
			f, err := strconv.ParseFloat(frac, 64)
			if err != nil {
				t.Fatal(err)
			}
			limit := int64(math.Floor(f * truth["total_memory"].(float64)))
			out := importSnapshot(t, dir, name)
			var r replayJSON
			tracerJSON(t, &r, "replay", out, "--limit", fmt.Sprint(limit), "--json")
			if !r.Reproduced || !r.LimitFilledIn || r.Mismatches != 0 {
				t.Errorf("reproduced %v, limit filled in %v, %d mismatches (%s)", r.Reproduced, r.LimitFilledIn, r.Mismatches, r.LimitNote)
			}
			if got := r.Settings["recorded"].LimitBytes; got != limit {
				t.Errorf("recorded settings' limit %d, want %d", got, limit)
			}
			sameStats(t, "replayed", r.Replayed, truth)
			sameStats(t, "recorded", r.Recorded, truth)
			_, text, _ := tracer(t, "replay", out, "--limit", fmt.Sprint(limit))
			if !strings.Contains(text, "filled in, the replay under the recorded settings reproduces every recorded event") {
				t.Errorf("the text does not say the replay reproduced the run:\n%s", text)
			}
		})
	}
	if tried < 5 {
		t.Errorf("%d snapshots with a fraction, want the 5 of testdata", tried)
	}
	// A limit that is not the run's is another setting, and replay says so.
	out := filepath.Join(dir, "oom__default__seed1.arrows")
	code, stdout, _ := tracer(t, "replay", out, "--limit", "5GiB", "--json")
	var r replayJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil || r.Reproduced || r.LimitFilledIn || r.LimitNote == "" {
		t.Errorf("replay with a limit not the run's: exit %d, reproduced %v, filled in %v, note %q", code, r.Reproduced, r.LimitFilledIn, r.LimitNote)
	}
}

// TestInfoSaysApproximate: where the import's model leaves the recording
// (here a --fraction far above the run's, under which the model satisfies
// the recorded OOM), info's figures are not PyTorch's, and info says so,
// with the fix; for the import with the right limit they are PyTorch's,
// and info does not.
func TestInfoSaysApproximate(t *testing.T) {
	const name = "oom__default__seed1"
	truth := readTruth(t, name)
	dir := t.TempDir()
	for _, c := range []struct {
		args   []string
		approx bool
	}{{[]string{"--fraction", "0.9", "--total-memory", "80GiB"}, true}, {nil, false}} {
		out := importSnapshot(t, dir, name, c.args...)
		var info infoJSON
		tracerJSON(t, &info, "info", out, "--json")
		differ := 0
		for k, v := range info.Stats {
			if w, ok := truth[k].(float64); ok && int64(w) != v {
				differ++
			}
		}
		d := info.PerDevice["0"]
		if d == nil {
			t.Fatalf("%v: no per_device entry for device 0", c.args)
		}
		if info.Approximate != c.approx || d.Approximate != c.approx || (differ > 0) != c.approx {
			t.Errorf("%v: approximate %v (device 0: %v), %d stats differ from memory_stats(); want approximate %v", c.args, info.Approximate, d.Approximate, differ, c.approx)
		}
		if c.approx && (!strings.Contains(info.ApproximateReason, "--fraction") || !strings.Contains(info.ApproximateReason, "event 125")) {
			t.Errorf("reason %q: want where (event 125) and the fix (--fraction)", info.ApproximateReason)
		}
		_, text, _ := tracer(t, "info", out)
		if strings.Contains(text, "APPROXIMATE") != c.approx {
			t.Errorf("%v: text says APPROXIMATE: %v, want %v:\n%s", c.args, !c.approx, c.approx, text)
		}
	}
}

// TestInfoWrapped: for a history that wrapped, info counts the
// reconstructed events apart from the recorded actions, and labels its
// peaks lower bounds, which they are of PyTorch's.
func TestInfoWrapped(t *testing.T) {
	const name = "mlp_train__wrap1500"
	truth := readTruth(t, name)
	out := importSnapshot(t, t.TempDir(), name)
	var info infoJSON
	tracerJSON(t, &info, "info", out, "--json")
	if !info.PeaksLowerBound {
		t.Error("peaks_lower_bound false for a wrapped history")
	}
	var recon int64
	for a, n := range info.Actions {
		if info.RecordedActions[a]+info.ReconstructedActions[a] != n {
			t.Errorf("%s: %d recorded + %d reconstructed, %d in all", a, info.RecordedActions[a], info.ReconstructedActions[a], n)
		}
		recon += info.ReconstructedActions[a]
	}
	if recon == 0 || recon != info.Reconstructed {
		t.Errorf("reconstructed_actions sum to %d, reconstructed_events %d", recon, info.Reconstructed)
	}
	// The retained window's allocations are fewer than the run's.
	if got, all := info.RecordedActions["alloc"], int64(truth["allocation.all.allocated"].(float64)); got >= all {
		t.Errorf("%d recorded allocs, the run made %d: the case checks nothing", got, all)
	}
	for k, v := range info.Stats {
		if strings.HasSuffix(k, ".peak") {
			if w, ok := truth[k].(float64); ok && v > int64(w) {
				t.Errorf("%s = %d, above memory_stats()'s %d: not a lower bound", k, v, int64(w))
			}
		}
	}
	_, text, _ := tracer(t, "info", out)
	if !strings.Contains(text, "lower bounds") || !strings.Contains(text, "reconstructed (the state at the start)") {
		t.Errorf("the text does not label the peaks lower bounds or the reconstructed events:\n%s", text)
	}
}

// twoDevices writes a copy of the trace at path whose events happen on
// device 0 and again on device 1.
func twoDevices(t *testing.T, path, out string) {
	t.Helper()
	rewrite(t, path, out, func(_ *trace.Meta, evs []trace.Event) []trace.Event {
		two := make([]trace.Event, 0, 2*len(evs))
		for dev := range int32(2) {
			for _, ev := range evs {
				ev.Device = dev
				two = append(two, ev)
			}
		}
		return two
	})
}

// rewrite writes to out the trace at path with its metadata and events
// changed by edit.
func rewrite(t *testing.T, path, out string, edit func(*trace.Meta, []trace.Event) []trace.Event) {
	t.Helper()
	rd, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var evs []trace.Event
	for rd.Next() {
		evs = append(evs, *rd.Event())
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	meta := rd.Meta()
	evs = edit(&meta, evs)
	w, err := trace.Create(out, meta, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range rd.Stacks() {
		w.AddStack(st)
	}
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReplayDevices: replay and info report every device. A trace with a
// snapshot's events on device 0 and again on device 1 replays, on each
// device, to the counters PyTorch reported, under the recorded settings and
// under a limit that fills in the run's.
func TestReplayDevices(t *testing.T) {
	const name = "oom__expandable__seed1"
	truth := readTruth(t, name)
	dir := t.TempDir()
	two := filepath.Join(dir, "two.arrows")
	twoDevices(t, importSnapshot(t, dir, name), two)
	f, _ := strconv.ParseFloat(truth["fraction"].(string), 64)
	limit := fmt.Sprint(int64(math.Floor(f * truth["total_memory"].(float64))))
	for _, args := range [][]string{{"replay", two, "--json"}, {"replay", two, "--limit", limit, "--json"}} {
		code, stdout, stderr := tracer(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var r replayJSON
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Devices) != 2 || !r.Reproduced {
			t.Fatalf("%v: %d devices, reproduced %v", args, len(r.Devices), r.Reproduced)
		}
		for _, dev := range []string{"0", "1"} {
			d := r.Devices[dev]
			if d == nil {
				t.Fatalf("%v: no device %s", args, dev)
			}
			sameStats(t, fmt.Sprintf("%v device %s replayed", args[2:], dev), d.Replayed, truth)
			sameStats(t, fmt.Sprintf("%v device %s recorded", args[2:], dev), d.Recorded, truth)
			if len(d.OOMs) != 1 || !d.OOMs[0].Recorded || d.Fragmentation["replayed"].GMLake == 0 {
				t.Errorf("%v device %s: OOMs %+v, fragmentation %+v", args, dev, d.OOMs, d.Fragmentation)
			}
		}
	}
	_, text, _ := tracer(t, "replay", two)
	if !strings.Contains(text, "device 0\n") || !strings.Contains(text, "device 1\n") || strings.Count(text, "device mallocs") != 2 {
		t.Errorf("the text does not report each device:\n%s", text)
	}
	var info infoJSON
	tracerJSON(t, &info, "info", two, "--json")
	for _, dev := range []string{"0", "1"} {
		d := info.PerDevice[dev]
		if d == nil {
			t.Fatalf("info: no per_device entry for device %s", dev)
		}
		sameStats(t, "info device "+dev, d.Stats, truth)
	}
}
