package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestFreeOrderKeys checks followsFreeOrder against real runs: hf_train run
// again under defaults and under max_split_size_mb:64 (testdata/pairs/repeats)
// differs from the first runs only in keys it names.
func TestFreeOrderKeys(t *testing.T) {
	for first, again := range map[string]string{
		"snapshots/hf_train__default.stats.json": "repeats/hf_train__rep.stats.json",
		"snapshots/hf_train__split64.stats.json": "repeats/hf_train__stk_split64.stats.json",
	} {
		var a, b pairRun
		a.readStats(t, filepath.Join(pairsDir, first))
		b.readStats(t, filepath.Join(pairsDir, again))
		differ := 0
		for k, v := range a.stats {
			if b.stats[k] != v {
				differ++
				if !followsFreeOrder(k) {
					t.Errorf("%s and %s differ in %s (%d, %d), which followsFreeOrder does not name", first, again, k, v, b.stats[k])
				}
			}
		}
		if differ == 0 {
			t.Errorf("%s and %s agree on every key: the free order left no trace", first, again)
		}
	}
}

// TestPairsOOM checks the OOMs the replay predicts against runs that died
// of one: where a program's run under a limit ended in an uncaught OOM (its
// requests are then a prefix of the others' runs), replaying each other
// run under that run's settings and limit must meet its first OOM at the
// same allocation, for the same bytes.
func TestPairsOOM(t *testing.T) {
	if testing.Short() {
		t.Skip("imports and replays every pair")
	}
	checked := 0
	for program, runs := range loadPairRuns(t) {
		for _, a := range runs {
			for _, b := range runs {
				if a.err != "" || b.err == "" {
					continue
				}
				name := fmt.Sprintf("%s %s → %s", program, a.tag, b.tag)
				if problem := oomProblem(t, a, b); problem != "" {
					t.Errorf("%s: %s", name, problem)
				} else {
					checked++
				}
			}
		}
	}
	t.Logf("%d replays under the settings of a run that died of an OOM: each met its first OOM where the real run did", checked)
	if checked == 0 {
		t.Error("no run died of an OOM: nothing checked")
	}
}

// oomProblem replays a under the settings and limit of b, a run that died
// of an uncaught OOM, and says how the replay's first OOM differs from b's:
// "" when it comes at the same allocation, for the same bytes.
func oomProblem(t *testing.T, a, b *pairRun) string {
	want, wantSize := allocsBeforeOOM(b.events, b.device)
	if want < 0 {
		return "the run died of an OOM that its snapshot does not show"
	}
	args := []string{"replay", a.trace, "--json", "--from-defaults", "--conf", b.conf, "--limit", strconv.FormatInt(b.limit, 10)}
	code, stdout, stderr := tracer(t, args...)
	if code != 0 {
		return fmt.Sprintf("%s: exit %d: %s", strings.Join(args, " "), code, firstLine(stderr))
	}
	var out struct {
		OOMs []struct {
			Seq  int64 `json:"seq"`
			Size int64 `json:"size"`
		} `json:"ooms"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.OOMs) == 0 {
		return fmt.Sprintf("no OOM; the real run met one after %d allocations", want)
	}
	first := out.OOMs[0]
	got := 0
	for _, ev := range a.events[:first.Seq] {
		if ev.Device == a.device && ev.Kind == trace.KindAlloc {
			got++
		}
	}
	// The OOM event holds the request rounded as PyTorch does (512 bytes
	// under these settings); the replay reports it as asked.
	if got != want || (first.Size+511)/512*512 != wantSize {
		return fmt.Sprintf("first OOM after %d allocations, for %d bytes; the real run's after %d, for %d", got, first.Size, want, wantSize)
	}
	return ""
}

// allocsBeforeOOM counts a device's allocations before its first OOM and
// gives that OOM's size; -1 when there is none.
func allocsBeforeOOM(events []trace.Event, device int32) (n int, size int64) {
	for _, ev := range events {
		if ev.Device != device {
			continue
		}
		switch ev.Kind {
		case trace.KindAlloc:
			n++
		case trace.KindOOM:
			return n, ev.Size
		}
	}
	return -1, 0
}
