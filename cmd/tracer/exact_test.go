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

	"github.com/tracer-dev/tracer/internal/pipeline"
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

	code, stdout, stderr := tracer(t, "replay", out, "--json")
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	var r replayJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Reproduced || r.Mismatches != 0 {
		t.Errorf("identity replay: reproduced %v, %d mismatches", r.Reproduced, r.Mismatches)
	}
	sameStats(t, "identity replay", r.Replayed, truth)
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
			code, stdout, stderr := tracer(t, "replay", out, "--limit", fmt.Sprint(limit), "--json")
			if code != 0 {
				t.Fatalf("replay: exit %d: %s", code, stderr)
			}
			var r replayJSON
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatal(err)
			}
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
