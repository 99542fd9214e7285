package record

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A folder's snapshots are told from its other files by their content:
// pickles, JSON snapshots and bare segment lists are taken, whatever their
// names; memory_stats() JSON, logs, empty and compressed files are not.
func TestSnapshotsIn(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"rank0.pickle":         "\x80\x04}q\x00.",
		"rank1.dump":           "\x80\x02}q\x00.",
		"snap.json":            `{"segments": [], "device_traces": [[]]}`,
		"segments.json":        ` [{"device": 0, "address": 1, "total_size": 2097152, "blocks": []}]`,
		"rank0.stats.json":     `{"allocated_bytes.all.peak": 1}`,
		"train.log":            "step 1\n",
		"empty.pickle":         "",
		"old.pickle.gz":        "\x1f\x8b\x08\x00",
		".hidden.pickle":       "\x80\x04}q\x00.",
		"rank0.arrows":         "\xff\xff\xff\xff",
		"sub/rank2.pickle":     "\x80\x04}q\x00.",
		"config.json":          `{"lr": 0.1}`,
		"bare-empty-list.json": "[]",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snaps, skipped, err := SnapshotsIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range snaps {
		got = append(got, filepath.Base(s))
	}
	want := []string{"bare-empty-list.json", "rank0.pickle", "rank1.dump", "segments.json", "snap.json"}
	if !slices.Equal(got, want) {
		t.Errorf("snapshots %v, want %v", got, want)
	}
	slices.Sort(skipped)
	if want := []string{"config.json", "empty.pickle", "old.pickle.gz", "rank0.arrows", "rank0.stats.json", "train.log"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}

	none := t.TempDir()
	os.WriteFile(filepath.Join(none, "old.pickle.gz"), []byte("\x1f\x8b"), 0o644)
	if _, _, err := SnapshotsIn(none); err == nil || !strings.Contains(err.Error(), "no PyTorch snapshot") || !strings.Contains(err.Error(), "gunzip") {
		t.Errorf("a folder of compressed snapshots: %v", err)
	}
	if _, _, err := SnapshotsIn(filepath.Join(none, "missing")); err == nil {
		t.Error("a missing folder: no error")
	}
}
