package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// tracer runs the CLI in-process and returns its exit status and output.
func tracer(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// tracerJSON runs the CLI in-process, which must succeed, and decodes its
// standard output (a --json report) into v.
func tracerJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	code, stdout, stderr := tracer(t, args...)
	if code != 0 {
		t.Fatalf("tracer %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		t.Fatalf("tracer %s: %v", strings.Join(args, " "), err)
	}
}

var snapshots = "../../testdata/snapshots"

func snapshotNames(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(snapshots, "*.pickle"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no snapshots in %s", snapshots)
	}
	var names []string
	for _, p := range m {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".pickle"))
	}
	return names
}

// For every real snapshot recorded from its start, `tracer import` then
// `tracer info --json` gives the same memory_stats() values PyTorch reported
// at the end of the run.
func TestImportInfoMatchesMemoryStats(t *testing.T) {
	keys := []string{"allocated_bytes.all.peak", "reserved_bytes.all.peak", "active_bytes.all.peak",
		"requested_bytes.all.peak", "segment.all.peak", "num_device_alloc", "num_device_free", "num_ooms",
		"allocation.all.allocated", "allocated_bytes.all.current", "reserved_bytes.all.current", "segment.all.current"}
	dir := t.TempDir()
	for _, name := range snapshotNames(t) {
		t.Run(name, func(t *testing.T) {
			var truth map[string]any
			raw, err := os.ReadFile(filepath.Join(snapshots, name+".stats.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &truth); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, name+".arrows")
			if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, name+".pickle"), "-o", out); code != 0 {
				t.Fatalf("import: exit %d: %s", code, stderr)
			}
			var info infoJSON
			tracerJSON(t, &info, "info", out, "--json")
			if info.Mismatches != 0 {
				t.Errorf("the model differs from the recording at %d events: %v", info.Mismatches, info.Warnings)
			}
			wrapped := truth["max_entries"].(float64) < 1e6
			if info.Truncated != wrapped {
				t.Errorf("truncated = %v, want %v", info.Truncated, wrapped)
			}
			for _, k := range keys {
				if wrapped && !strings.HasSuffix(k, ".current") {
					continue // whole-process counters: the trace lacks the run's start
				}
				want, ok := truth[k].(float64)
				if !ok {
					t.Fatalf("%s missing from stats.json", k)
				}
				if got := info.Stats[k]; got != int64(want) {
					t.Errorf("%s = %d, memory_stats() says %d", k, got, int64(want))
				}
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("hello\n"), 0o644)
	empty := filepath.Join(dir, "empty.pickle")
	os.WriteFile(empty, nil, 0o644)
	cut := filepath.Join(dir, "cut.pickle")
	whole, _ := os.ReadFile(filepath.Join(snapshots, "oom__default__seed1.pickle"))
	os.WriteFile(cut, whole[:len(whole)/2], 0o644)
	for _, tc := range []struct {
		args []string
		code int
		say  string // the one line on stderr mentions this
	}{
		{[]string{"--bogus"}, 2, "unknown flag"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"import"}, 2, "requires at least 1 arg"},
		{[]string{"import", filepath.Join(dir, "missing.pickle")}, 1, "missing.pickle"},
		{[]string{"import", dir}, 1, "cut.pickle"}, // every snapshot in it; empty.pickle and notes.txt are not
		{[]string{"import", text, "-o", filepath.Join(dir, "t.arrows")}, 1, "notes.txt"},
		{[]string{"import", empty, "-o", filepath.Join(dir, "e.arrows")}, 1, "empty.pickle"},
		{[]string{"import", cut, "-o", filepath.Join(dir, "c.arrows")}, 1, "cut.pickle"},
		{[]string{"import", cut, "-o", filepath.Join(dir, "no", "such", "x.arrows")}, 1, "output " + filepath.Join(dir, "no", "such", "x.arrows")},
		{[]string{"import", cut, "-o", filepath.Join(text, "x.arrows")}, 1, "not a directory"},
		{[]string{"info", filepath.Join(dir, "missing.arrows")}, 1, "missing.arrows"},
		{[]string{"info", text}, 1, "notes.txt"},
		{[]string{"info", filepath.Join(snapshots, "oom__default__seed1.pickle")}, 1, "tracer import"},
		{[]string{"replay", "--round", "1000"}, 2, "power of two"},
		{[]string{"replay", "--device", "tpu"}, 2, "--device"},
		{[]string{"replay", "--conf", "max_split_size_mb:5"}, 2, "must be >= 20"},
		{[]string{"replay", "--conf", "bogus_key:1"}, 2, "bogus_key"},
		{[]string{"replay", "--limit", "lots"}, 2, "not a size"},
		{[]string{"plot", filepath.Join(dir, "x.gif")}, 2, ".png"},
		{[]string{"plot", filepath.Join(dir, "x.png"), "--kind", "pie"}, 2, "--kind"},
	} {
		code, _, stderr := tracer(t, tc.args...)
		if code != tc.code {
			t.Errorf("tracer %v: exit %d, want %d (stderr %q)", tc.args, code, tc.code, stderr)
		}
		first := strings.SplitN(stderr, "\n", 2)[0]
		if !strings.Contains(first, tc.say) || strings.Contains(stderr, "goroutine") {
			t.Errorf("tracer %v: stderr %q should say %q on its first line", tc.args, stderr, tc.say)
		}
	}
	// Failed imports leave nothing behind.
	for _, name := range []string{"t.arrows", "e.arrows", "c.arrows"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("a failed import left %s", name)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("temporary files left behind: %v", names)
	}
}

// A trace cut short (a killed recording) is replayed and analyzed up to its
// last whole batch, with a warning saying so.
func TestCutTraceWarns(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.arrows")
	if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, "mlp_train__default.pickle"), "-o", whole); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.arrows")
	os.WriteFile(cut, data[:len(data)-100], 0o644)
	for _, args := range [][]string{{"replay", cut, "--round", "4096"}, {"analyze", cut}} {
		code, _, stderr := tracer(t, args...)
		if code != 0 || strings.Count(stderr, "end-of-stream marker") != 1 {
			t.Errorf("tracer %v: exit %d, stderr %q: want one warning about the cut", args, code, stderr)
		}
	}
	if _, _, stderr := tracer(t, "replay", whole, "--round", "4096"); strings.Contains(stderr, "warning") {
		t.Errorf("a whole trace warns: %q", stderr)
	}
}

// The README's first command works on the embedded sample.
func TestSampleCommands(t *testing.T) {
	code, stdout, stderr := tracer(t, "replay", "--round", "4096")
	if code != 0 || !strings.Contains(stdout, "allocated peak") || !strings.Contains(stderr, "built-in sample") {
		t.Fatalf("replay on the sample: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = tracer(t, "replay", "--json")
	var r replayJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("replay --json: exit %d: %s", code, stdout)
	}
	// Replaying under the recorded settings reproduces the recorded run.
	for k, v := range r.Recorded {
		if r.Replayed[k] != v {
			t.Errorf("%s: replayed %d, recorded %d", k, r.Replayed[k], v)
		}
	}
	if r.Mismatches != 0 {
		t.Errorf("%d mismatches replaying the sample under its own settings", r.Mismatches)
	}
	code, stdout, _ = tracer(t, "analyze", "--top", "3")
	if code != 0 || !strings.Contains(stdout, "live at the allocated peak") {
		t.Fatalf("analyze: exit %d\n%s", code, stdout)
	}
	png := filepath.Join(t.TempDir(), "peak.png")
	if code, _, stderr := tracer(t, "plot", png); code != 0 {
		t.Fatalf("plot: exit %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("plot wrote no PNG: %v", err)
	}
	if code, stdout, _ := tracer(t, "version"); code != 0 || !strings.HasPrefix(stdout, "tracer ") {
		t.Errorf("version: %d %q", code, stdout)
	}
}

// A snapshot whose recorded settings the model cannot reproduce (here the
// attention run's roundup_power2_divisions:8, rewritten to :4 in its
// allocator_settings) imports, with one warning saying where the model
// left the recording; the real snapshots import without one.
func TestImportWarnsDivergence(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(snapshots, "attention_infer__pow2div8.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	from, to := []byte("roundup_power2_divisions:8"), []byte("roundup_power2_divisions:4")
	if bytes.Count(raw, from) != 1 {
		t.Fatalf("the snapshot holds %q %d times, want once", from, bytes.Count(raw, from))
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "other.pickle")
	if err := os.WriteFile(in, bytes.Replace(raw, from, to, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "other.arrows")
	code, _, stderr := tracer(t, "import", in, "-o", out)
	var seq int64
	var size, unit string
	var addr uint64
	if code != 0 || strings.Count(stderr, "warning:") != 1 {
		t.Fatalf("import: exit %d, stderr %q: want one warning about the model leaving the recording", code, stderr)
	}
	msg := stderr[strings.Index(stderr, "leaves the recording at seq"):]
	if _, err := fmt.Sscanf(msg, "leaves the recording at seq %d (alloc of %s %s at %v", &seq, &size, &unit, &addr); err != nil {
		t.Fatalf("warning %q: %v", stderr, err)
	}
	// The trace agrees: the event at seq is that alloc, without a block
	// size, and the allocs before it have theirs.
	rd, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	sized := 0
	for rd.Next() {
		ev := rd.Event()
		if ev.Kind != trace.KindAlloc || ev.Flags&trace.FlagReconstructed != 0 {
			continue
		}
		switch {
		case ev.Seq < seq && ev.BlockSize > 0:
			sized++
		case ev.Seq < seq:
			t.Errorf("alloc at seq %d, before the divergence, has no block size", ev.Seq)
		case ev.Seq == seq && (ev.Addr != addr || ev.BlockSize != 0):
			t.Errorf("the alloc at seq %d is at %#x with block size %d; the warning says %#x, none", seq, ev.Addr, ev.BlockSize, addr)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d allocs sized before seq %d", sized, seq)
	code, _, stderr = tracer(t, "import", filepath.Join(snapshots, "attention_infer__pow2div8.pickle"), "-o", filepath.Join(dir, "own.arrows"))
	if code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("import of the real snapshot: exit %d, stderr %q", code, stderr)
	}
}

// TestImportWarnsOOMDivergence: a memory limit above the recording's lets
// the model satisfy the recorded OOM, and the annotation of block sizes
// stops there, which import says in one warning; the trace agrees (the
// event at that seq is the OOM, the allocs before it have block sizes, the
// ones after it none). With the limit import infers, no warning.
func TestImportWarnsOOMDivergence(t *testing.T) {
	in := filepath.Join(snapshots, "oom__default__seed1.pickle")
	dir := t.TempDir()
	out := filepath.Join(dir, "roomy.arrows")
	code, _, stderr := tracer(t, "import", in, "--fraction", "0.9", "--total-memory", "80GiB", "-o", out)
	if code != 0 || strings.Count(stderr, "warning:") != 1 {
		t.Fatalf("import: exit %d, stderr %q: want one warning about the model leaving the recording", code, stderr)
	}
	var seq int64
	msg := stderr[strings.Index(stderr, "leaves the recording at seq"):]
	if _, err := fmt.Sscanf(msg, "leaves the recording at seq %d (an out-of-memory of", &seq); err != nil {
		t.Fatalf("warning %q: %v", stderr, err)
	}
	rd, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	before, after := 0, 0
	for rd.Next() {
		ev := rd.Event()
		switch {
		case ev.Seq == seq && ev.Kind != trace.KindOOM:
			t.Errorf("the event at seq %d is a %s, the warning says an OOM", seq, ev.Kind)
		case ev.Kind != trace.KindAlloc:
		case ev.Seq < seq && ev.BlockSize == 0:
			t.Errorf("alloc at seq %d, before the OOM, has no block size", ev.Seq)
		case ev.Seq < seq:
			before++
		case ev.BlockSize != 0:
			t.Errorf("alloc at seq %d, after the OOM, has block size %d", ev.Seq, ev.BlockSize)
		default:
			after++
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if before == 0 || after == 0 {
		t.Errorf("%d allocs before the OOM, %d after: the case checks nothing", before, after)
	}
	code, _, stderr = tracer(t, "import", in, "-o", filepath.Join(dir, "own.arrows"))
	if code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("import with the inferred limit: exit %d, stderr %q", code, stderr)
	}
}
