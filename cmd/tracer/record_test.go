package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// parseRecord parses a record command line without running it.
func parseRecord(t *testing.T, args ...string) (*recordOptions, error) {
	t.Helper()
	var got *recordOptions
	cmd := newRecordCmd(func(_ context.Context, o *recordOptions) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return got, err
}

func TestRecordFlags(t *testing.T) {
	t.Setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")
	o, err := parseRecord(t)
	if err != nil || o.Device != "auto" || o.Out != "trace.arrows" || o.Workload != "" || o.Conf != "max_split_size_mb:128" || o.ConfGiven {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	o, err = parseRecord(t, "-w", "small-tensors", "--device", "sim", "--limit", "2GiB", "--conf", "expandable_segments:True", "-o", "x.arrows")
	if err != nil || o.Workload != "small-tensors" || o.Device != "sim" || o.Limit != "2GiB" || o.Conf != "expandable_segments:True" || !o.ConfGiven {
		t.Errorf("workload flags: %+v, %v", o, err)
	}
	// Everything after -- is the program's, flags included.
	o, err = parseRecord(t, "-o", "p.arrows", "--stacks", "all", "--", "python", "x.py", "--device", "cuda", "-o", "y")
	if err != nil || strings.Join(o.Command, " ") != "python x.py --device cuda -o y" || o.Out != "p.arrows" || o.Stacks != "all" || o.Device != "auto" {
		t.Errorf("program: %+v, %v", o, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"python", "x.py"}, `unexpected argument "python": put the program after --`},
		{[]string{"--device", "tpu"}, `--device "tpu"`},
		{[]string{"--stacks", "all"}, "--stacks applies to a program"},
		{[]string{"--workload", "x", "--", "python"}, "--workload is for workloads"},
		{[]string{"--stacks", "cpp", "--", "python"}, `--stacks "cpp"`},
	} {
		if _, err := parseRecord(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestRecordCLI(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "b.arrows")
	code, stdout, stderr := tracer(t, "record", "-w", "backward-1gib", "--device", "sim", "-o", out)
	if code != 0 || !strings.Contains(stdout, "backward-1gib on sim: 50 events") || !strings.Contains(stdout, "peak reserved 5.00 GiB, peak allocated 5.00 GiB → "+out) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	rd, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if m := rd.Meta(); m.Source != trace.SourceRecord || m.Extra["workload"] != "backward-1gib" {
		t.Errorf("meta %+v", m)
	}
	rd.Close()

	// Plain record: the default workload, on the simulated device here, said on stderr.
	if os.Getenv("TRACER_GPU") == "" {
		wd, _ := os.Getwd()
		defer os.Chdir(wd)
		os.Chdir(dir)
		code, stdout, stderr = tracer(t, "record")
		if code != 0 || !strings.Contains(stderr, "recording fragment-10mb on the simulated device") || !strings.Contains(stdout, "→ trace.arrows") {
			t.Errorf("plain record: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
		}
		os.Chdir(wd)
	}

	code, _, stderr = tracer(t, "record", "-w", "fragment-10mb", "--device", "sim", "--limit", "1100MiB", "-o", filepath.Join(dir, "oom.arrows"))
	if code != 1 || !strings.Contains(stderr, "fragment-10mb.workload:") || !strings.Contains(stderr, "CUDA out of memory") {
		t.Errorf("oom: exit %d, stderr %s", code, stderr)
	}
	code, stdout, _ = tracer(t, "record", "--list-workloads")
	if code != 0 || len(strings.Split(strings.TrimSpace(stdout), "\n")) != 5 || !strings.HasPrefix(stdout, "backward-1gib ") {
		t.Errorf("list: exit %d, %s", code, stdout)
	}
	bad := filepath.Join(dir, "bad.workload")
	os.WriteFile(bad, []byte("alloc a 1\nfree b\n"), 0o644)
	code, _, stderr = tracer(t, "record", "-w", bad, "--device", "sim", "-o", filepath.Join(dir, "x.arrows"))
	if code != 1 || !strings.Contains(stderr, bad+`:2: no earlier alloc of "b"`) {
		t.Errorf("bad workload: exit %d, stderr %s", code, stderr)
	}
	code, _, stderr = tracer(t, "record", "--conf", "max_split_size_mb:1", "--device", "sim")
	if code != 2 {
		t.Errorf("bad conf: exit %d, stderr %s", code, stderr)
	}
}

// The program's exit status and output pass through tracer.
func TestRecordProgramCLI(t *testing.T) {
	fake, _ := filepath.Abs("../../record/testdata/fakepython.sh")
	snap, _ := filepath.Abs("../../testdata/snapshots/oom__default__seed1.pickle")
	t.Setenv("FAKE_SNAPSHOT", snap)
	t.Setenv("FAKE_EXIT", "5")
	out := filepath.Join(t.TempDir(), "p.arrows")
	code, stdout, stderr := tracer(t, "record", "-o", out, "--", fake, "train.py", "--epochs", "1")
	if code != 5 || stdout != "out: train.py --epochs 1\n" || !strings.Contains(stderr, "(dumped at exit)") || !strings.Contains(stderr, "→ "+out) {
		t.Errorf("exit %d\nstdout %q\nstderr %s", code, stdout, stderr)
	}
	t.Setenv("FAKE_EXIT", "0")
	t.Setenv("FAKE_MODE", "no-torch")
	// A program that succeeds without torch is not a failure: tracer says
	// nothing was recorded, and exits 0 as the program did.
	code, _, stderr = tracer(t, "record", "-o", out, "--", fake)
	if code != 0 || !strings.Contains(stderr, "tracer: nothing recorded: no torch:") {
		t.Errorf("no torch: exit %d, stderr %s", code, stderr)
	}
	// One that fails before torch fails as it did, and tracer says so
	// first (python3 missing.py said "no torch").
	t.Setenv("FAKE_EXIT", "2")
	code, _, stderr = tracer(t, "record", "-o", out, "--", fake, "missing.py")
	if code != 2 || !strings.Contains(stderr, "tracer: "+fake+" exited with status 2 (its output above says why); nothing recorded") {
		t.Errorf("failing program: exit %d, stderr %s", code, stderr)
	}
	code, _, stderr = tracer(t, "record", "--", "no-such-python-here")
	if code != 127 || !strings.Contains(stderr, "no-such-python-here: command not found") {
		t.Errorf("no python: exit %d, stderr %s", code, stderr)
	}
}
