package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/trace"
)

// ddpDir makes a folder as a user's multi-rank run leaves it: the two
// ranks' snapshots of the real DDP program under setting tag
// (testdata/pairs), with the memory_stats() JSON beside them and a
// compressed copy, which import must skip.
func ddpDir(t *testing.T, tag string) string {
	t.Helper()
	dir := t.TempDir()
	for _, r := range []string{"rank0", "rank1"} {
		name := "ddp__" + tag + "." + r
		gunzip(t, filepath.Join(pairsDir, "snapshots", name+".pickle.gz"), filepath.Join(dir, name+".pickle"))
		copyFile(t, filepath.Join(pairsDir, "snapshots", name+".stats.json"), filepath.Join(dir, name+".stats.json"))
	}
	copyFile(t, filepath.Join(pairsDir, "snapshots", "ddp__"+tag+".rank0.pickle.gz"), filepath.Join(dir, "old.pickle.gz"))
	return dir
}

// importDDP imports the DDP run under tag into a folder of traces.
func importDDP(t *testing.T, tag string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "traces")
	if code, _, stderr := tracer(t, "import", ddpDir(t, tag), "-o", out); code != 0 {
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
		if got := traceMeta(t, p).Extra[analysis.RankKey]; got != string(rune('0'+r)) {
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
	if got := traceMeta(t, filepath.Join(out1, "mem.arrows")).Extra[analysis.RankKey]; got != "7" {
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
