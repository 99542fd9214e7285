package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// ddpDir makes a folder as a user's multi-rank run leaves it: the two
// ranks' snapshots of the real DDP program under setting tag
// (ddpSource), with the memory_stats() JSON beside them and a
// compressed copy, which import must skip.
func ddpDir(t *testing.T, tag string) string {
	t.Helper()
	dir := t.TempDir()
	for _, r := range []string{"rank0", "rank1"} {
		name := "ddp__" + tag + "." + r
		gunzip(t, filepath.Join(ddpSource(tag), name+".pickle.gz"), filepath.Join(dir, name+".pickle"))
		copyFile(t, filepath.Join(ddpSource(tag), name+".stats.json"), filepath.Join(dir, name+".stats.json"))
	}
	copyFile(t, filepath.Join(ddpSource(tag), "ddp__"+tag+".rank0.pickle.gz"), filepath.Join(dir, "old.pickle.gz"))
	return dir
}

// importDDP imports the DDP run under tag into a folder of traces, with
// the import flags args.
func importDDP(t *testing.T, tag string, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "traces")
	if code, _, stderr := tracer(t, append([]string{"import", ddpDir(t, tag), "-o", out}, args...)...); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	return out
}

func traceMeta(t *testing.T, path string) trace.Meta {
	t.Helper()
	rd, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	return rd.Meta()
}

// tracer import DIR imports every snapshot in the folder, skipping the
// other files, into one trace per rank that records its rank.
func TestImportDir(t *testing.T) {
	dir := ddpDir(t, "default")
	out := filepath.Join(t.TempDir(), "traces")
	code, stdout, stderr := tracer(t, "import", dir, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "2 snapshots; skipped 3 other files") {
		t.Errorf("stderr does not say what was skipped: %q", stderr)
	}
	only(t, out, "ddp__default.rank0.arrows", "ddp__default.rank1.arrows")
	for r := range 2 {
		p := filepath.Join(out, "ddp__default.rank"+string(rune('0'+r))+".arrows")
		if !strings.Contains(stdout, p) {
			t.Errorf("stdout does not name %s: %q", p, stdout)
		}
		if got := traceMeta(t, p).Extra[trace.ExtraRank]; got != string(rune('0'+r)) {
			t.Errorf("%s: rank %q, want %d", p, got, r)
		}
	}
	// A folder with one snapshot still writes into the -o folder.
	one := t.TempDir()
	copyFile(t, filepath.Join(dir, "ddp__default.rank1.pickle"), filepath.Join(one, "mem.pickle"))
	out1 := filepath.Join(t.TempDir(), "one")
	if code, _, stderr := tracer(t, "import", one, "-o", out1, "--rank", "7"); code != 0 {
		t.Fatalf("one: exit %d: %s", code, stderr)
	}
	if got := traceMeta(t, filepath.Join(out1, "mem.arrows")).Extra[trace.ExtraRank]; got != "7" {
		t.Errorf("--rank 7 stored rank %q", got)
	}
	for _, args := range [][]string{
		{"import", dir, "--rank", "3", "-o", t.TempDir()}, // two snapshots, one rank
		{"import", filepath.Join(dir, "old.pickle.gz"), "--rank", "-1"},
	} {
		if code, _, stderr := tracer(t, args...); code != 2 || !strings.Contains(stderr, "--rank") {
			t.Errorf("%v: exit %d, %q; want 2 and a line about --rank", args, code, stderr)
		}
	}
	empty := t.TempDir()
	copyFile(t, filepath.Join(dir, "old.pickle.gz"), filepath.Join(empty, "old.pickle.gz"))
	if code, _, stderr := tracer(t, "import", empty); code != 1 || !strings.Contains(stderr, "no PyTorch snapshot") || !strings.Contains(stderr, "gunzip") {
		t.Errorf("a folder of .gz: exit %d, %q", code, stderr)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 1 {
		t.Errorf("a failed import left files: %v", ents)
	}
}

// rankTable is what the tests read of an analysis.RankTable in JSON.
type rankTable struct {
	Rows []struct {
		Trace         string `json:"trace"`
		Rank          int    `json:"rank"`
		Device        int32  `json:"device"`
		PeakAllocated int64  `json:"peak_allocated_bytes"`
		PeakReserved  int64  `json:"peak_reserved_bytes"`
	} `json:"rows"`
	Reserved struct {
		HighestRank      int   `json:"highest_rank"`
		HighestBytes     int64 `json:"highest_bytes"`
		LowestRank       int   `json:"lowest_rank"`
		AboveLowestBytes int64 `json:"above_lowest_bytes"`
	} `json:"reserved"`
}

// info, analyze and replay of the two ranks of a real DDP run (each given,
// or their folder) print a table by rank whose figures are each trace's
// own, and name the rank that peaks highest. Under a memory limit the
// ranks differ: rank 0 reserved 318 MiB, rank 1 290 MiB.
func TestRanksTable(t *testing.T) {
	dir := importDDP(t, "retry")
	r0, r1 := filepath.Join(dir, "ddp__retry.rank0.arrows"), filepath.Join(dir, "ddp__retry.rank1.arrows")
	var alone [2]struct {
		Stats map[string]int64 `json:"stats"`
	}
	tracerJSON(t, &alone[0], "info", r0, "--json")
	tracerJSON(t, &alone[1], "info", r1, "--json")
	check := func(what string, tab rankTable) {
		t.Helper()
		if len(tab.Rows) != 2 {
			t.Fatalf("%s: %d rows, want 2", what, len(tab.Rows))
		}
		for i, row := range tab.Rows {
			st := alone[i].Stats
			if row.Rank != i || row.Device != int32(i) || row.PeakReserved != st["reserved_bytes.all.peak"] || row.PeakAllocated != st["allocated_bytes.all.peak"] {
				t.Errorf("%s: row %d %+v; want rank %d on device %d with info's peaks %d %d", what, i, row, i, i,
					st["allocated_bytes.all.peak"], st["reserved_bytes.all.peak"])
			}
		}
		d := alone[0].Stats["reserved_bytes.all.peak"] - alone[1].Stats["reserved_bytes.all.peak"]
		if r := tab.Reserved; r.HighestRank != 0 || r.LowestRank != 1 || r.AboveLowestBytes != d || d != 28<<20 {
			t.Errorf("%s: reserved spread %+v; want rank 0 above rank 1 by %d (28 MiB)", what, r, d)
		}
	}

	var info struct {
		Ranks  rankTable `json:"ranks"`
		Traces []struct {
			Trace string `json:"trace"`
			Rank  *int   `json:"rank"`
		} `json:"traces"`
	}
	tracerJSON(t, &info, "info", dir, "--json")
	check("info DIR", info.Ranks)
	if len(info.Traces) != 2 || info.Traces[1].Rank == nil || *info.Traces[1].Rank != 1 {
		t.Errorf("info traces %+v", info.Traces)
	}
	code, stdout, stderr := tracer(t, "info", r1, r0) // two files, in any order
	if code != 0 || !strings.Contains(stdout, "reserved peak highest on rank 0: 318.0 MiB, +14.0 MiB (+4.6%) above the median, +28.0 MiB (+9.7%) above the lowest, rank 1") {
		t.Errorf("info r1 r0: exit %d, %s\n%s", code, stderr, stdout)
	}

	var an struct {
		Ranks  rankTable `json:"ranks"`
		Traces []struct {
			How string `json:"how"`
		} `json:"traces"`
	}
	tracerJSON(t, &an, "analyze", r0, r1, "--json")
	check("analyze", an.Ranks)
	code, stdout, _ = tracer(t, "analyze", dir)
	if code != 0 || !strings.Contains(stdout, "the highest reserved peak: "+r0+" (as recorded)") || !strings.Contains(stdout, "live at the allocated peak") {
		t.Errorf("analyze DIR: exit %d, no analysis of rank 0 after the table:\n%s", code, stdout)
	}

	// replay: each rank as tracer replay TRACE reports it.
	var rep struct {
		Recorded, Replayed rankTable
		Traces             []struct {
			Replayed map[string]int64 `json:"replayed"`
		} `json:"traces"`
	}
	tracerJSON(t, &rep, "replay", dir, "--conf", "expandable_segments:True", "--json")
	check("replay (recorded)", rep.Recorded)
	for i, p := range []string{r0, r1} {
		var one struct {
			Replayed map[string]int64 `json:"replayed"`
		}
		tracerJSON(t, &one, "replay", p, "--conf", "expandable_segments:True", "--json")
		got := rep.Replayed.Rows[i].PeakReserved
		if want := one.Replayed["reserved_bytes.all.peak"]; got != want || rep.Traces[i].Replayed["reserved_bytes.all.peak"] != want {
			t.Errorf("replay rank %d: reserved peak %d in the table, %d alone", i, got, want)
		}
	}
	code, stdout, _ = tracer(t, "replay", r0, r1, "--conf", "expandable_segments:True")
	if code != 0 || !strings.Contains(stdout, "2 traces replayed under: expandable_segments:True") || strings.Count(stdout, "ddp__retry.rank") != 2 {
		t.Errorf("replay text: exit %d\n%s", code, stdout)
	}
	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"replay", r0, r1, "-o", filepath.Join(t.TempDir(), "x.arrows")}, 2, "one trace"},
		{[]string{"replay", dir, "--device", "cuda"}, 2, "one trace"},
		{[]string{"info", t.TempDir()}, 1, "holds no traces"},
		{[]string{"analyze", r0, filepath.Join(dir, "missing.arrows")}, 1, "missing.arrows"},
	} {
		code, _, stderr := tracer(t, tc.args...)
		if code != tc.code || !strings.Contains(strings.SplitN(stderr, "\n", 2)[0], tc.say) {
			t.Errorf("%v: exit %d, %q; want %d saying %q", tc.args, code, stderr, tc.code, tc.say)
		}
	}
}

// Ctrl-C stops the commands of several traces too: exit 130, nothing
// written beside the traces.
func TestRanksInterrupted(t *testing.T) {
	dir := importDDP(t, "default")
	r0, r1 := filepath.Join(dir, "ddp__default.rank0.arrows"), filepath.Join(dir, "ddp__default.rank1.arrows")
	snaps := ddpDir(t, "default")
	for _, args := range [][]string{
		{"info", dir}, {"analyze", r0, r1}, {"replay", dir, "--round", "4096"}, {"diff", r0, r1},
		{"import", snaps, "-o", filepath.Join(t.TempDir(), "out")},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(&interrupted{syscall.SIGINT})
		var out, errb bytes.Buffer
		if code := run(ctx, args, &out, &errb); code != 130 || !strings.Contains(errb.String(), "interrupted") {
			t.Errorf("%v: exit %d, %q; want 130, interrupted", args, code, errb.String())
		}
	}
	only(t, dir, "ddp__default.rank0.arrows", "ddp__default.rank1.arrows")
	if ents, _ := os.ReadDir(snaps); len(ents) != 5 {
		t.Errorf("an interrupted import left files in %s: %v", snaps, ents)
	}
}

// ddpSource is where the DDP run under tag lives: testdata/ranks keeps an
// earlier run under a limit (retry) whose ranks peak 28 MiB apart, which
// testdata/pairs has since remade; the others are the pairs' own.
func ddpSource(tag string) string {
	if tag == "retry" {
		return "../../testdata/ranks"
	}
	return filepath.Join(pairsDir, "snapshots")
}
