package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The rough edges of issue 26, each as a new user met it: the exit status,
// what the output must say (want) and must not (not). In-process, on the
// built-in sample, the oom snapshot (a limit inferred at import) and the
// max_split_size_mb:32 one.
func TestRoughEdges(t *testing.T) {
	dir := t.TempDir()
	traces := map[string]string{}
	for name, snap := range map[string]string{"oom": "oom__default__seed1", "split": "mlp_train__split32"} {
		traces[name] = filepath.Join(dir, name+".arrows")
		if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, snap+".pickle"), "-o", traces[name]); code != 0 {
			t.Fatalf("import %s: %s", snap, stderr)
		}
	}
	oom, split := traces["oom"], traces["split"]
	const gib24 = `"limit_bytes": 25769803776`
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in stdout and stderr together
		not  []string
	}{
		// One size rule: binary units in any case.
		{"24GB is 24 GiB", []string{"replay", "--limit", "24GB", "--json"}, 0, []string{gib24}, nil},
		{"24G", []string{"replay", "--limit", "24G", "--json"}, 0, []string{gib24}, nil},
		{"24gib", []string{"replay", "--limit", "24gib", "--json"}, 0, []string{gib24}, nil},
		{"size rule in --help", []string{"replay", "--help"}, 0, []string{"24G = 24GB = 24GiB = 24gib"}, nil},
		{"limit 0", []string{"replay", "--limit", "0"}, 2, []string{"--limit 0: no allocation fits", "--limit none"}, nil},
		{"limit 0 to record", []string{"record", "--device", "sim", "--limit", "0GiB", "-o", filepath.Join(dir, "r.arrows")}, 2, []string{"--limit 0GiB: no allocation fits"}, nil},
		// Unsetting a recorded setting.
		{"max_split_size_mb:none", []string{"replay", split, "--conf", "max_split_size_mb:none"}, 0,
			[]string{"recorded settings: max_split_size_mb:32", "replayed settings: defaults"}, nil},
		{"max_split_size_mb:0 hints at none", []string{"replay", split, "--conf", "max_split_size_mb:0"}, 2, []string{"say max_split_size_mb:none"}, nil},
		// Did you mean.
		{"mistyped flag", []string{"replay", "--lmit", "2G"}, 2, []string{"unknown flag: --lmit (did you mean --limit?)"}, nil},
		{"one-dash flag", []string{"analyze", "-top", "3"}, 2, []string{"did you mean --top?"}, nil},
		{"mistyped command", []string{"replya"}, 2, []string{`unknown command "replya" (did you mean replay?)`}, []string{"\n\t"}},
		{"plot arguments swapped", []string{"plot", "a.arrows", "out.png"}, 2, []string{"plot takes the image first, then the traces: tracer plot out.png a.arrows"}, nil},
		{"plot without an image", []string{"plot", "a.arrows"}, 2, []string{"a.arrows is a trace: plot takes the image to write first"}, nil},
		{"export arguments swapped", []string{"export", "run.parquet"}, 2, []string{"run.parquet is the output: put it after -o"}, nil},
		// Shell completion.
		{"complete --kind", []string{"__complete", "plot", "--kind", ""}, 0, []string{"fragmentation\ncompare\nsegments"}, nil},
		{"complete --device", []string{"__complete", "record", "--device", ""}, 0, []string{"auto\ncuda\nsim"}, nil},
		{"complete --workload", []string{"__complete", "record", "--workload", ""}, 0, []string{"backward-1gib\t", "fragment-10mb\t"}, nil},
		{"complete --conf keys", []string{"__complete", "replay", "--conf", "expandable_segments:True,max_s"}, 0,
			[]string{"expandable_segments:True,max_split_size_mb:\n"}, []string{"garbage"}},
		// Labels.
		{"inferred limit", []string{"info", oom}, 0, []string{"limit       2.36 GiB per process, INFERRED (the recording's peak reserved"}, nil},
		{"1 OOM", []string{"info", oom}, 0, []string{"1 device free, 107 allocations, 1 alloc retry, 1 OOM\n"}, []string{"1 OOMs"}},
		{"OOM under a limit", []string{"analyze", oom}, 0, []string{"24.0 MiB free under the 2.36 GiB memory limit"}, []string{"device free 76"}},
		{"OOM of the recording under other settings", []string{"replay", oom, "--conf", "expandable_segments:True"}, 0,
			[]string{"(the recording failed at this request too)"}, []string{"(as recorded)"}},
		{"OOM as recorded", []string{"replay", oom}, 0, []string{"(as recorded)"}, nil},
		{"no stack, and why", []string{"analyze"}, 0, []string{"(no stack): PyTorch recorded no Python frame", "--full-stacks shows whole stacks"}, nil},
		{"full stacks", []string{"analyze", "--full-stacks", "--top", "3"}, 0,
			[]string{"\n                                 site-packages/torch/optim/adam.py:238 step\n"}, []string{"adam.py:238 step…", "--full-stacks shows"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := tracer(t, tc.args...)
			out := stdout + stderr
			if code != tc.code {
				t.Errorf("exit %d, want %d: %s", code, tc.code, clip(out))
			}
			if code != 0 && strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
				t.Errorf("more than one line of error: %q", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
}

// An export stopped by Ctrl-C exits 130 and leaves no file; one that runs
// writes the Parquet file beside the trace.
func TestExportInterrupted(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "s.parquet")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(&interrupted{syscall.SIGINT})
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"export", "-o", out}, &stdout, &stderr); code != 130 {
		t.Errorf("exit %d, want 130: %s", code, stderr.String())
	}
	only(t, dir)
	if code, stdout, stderr := tracer(t, "export", "-o", out, "--json"); code != 0 || !strings.Contains(stdout, `"rows": 1725`) {
		t.Errorf("exit %d: %s%s", code, stdout, stderr)
	}
	only(t, dir, "s.parquet")
}
