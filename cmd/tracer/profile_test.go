package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestStartProfile: TRACER_CPUPROFILE, TRACER_MEMPROFILE and
// TRACER_EXECTRACE write their profiles when the command ends, and a
// profile that cannot be written is said on stderr without stopping
// anything.
func TestStartProfile(t *testing.T) {
	dir := t.TempDir()
	cpu, mem, exec := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof"), filepath.Join(dir, "exec.trace")
	t.Setenv("TRACER_CPUPROFILE", cpu)
	t.Setenv("TRACER_MEMPROFILE", mem)
	t.Setenv("TRACER_EXECTRACE", exec)
	var stderr bytes.Buffer
	stop := startProfile(&stderr)
	stop()
	for _, p := range []string{cpu, mem, exec} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (want a profile)", p, err)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %q", stderr.String())
	}
	t.Setenv("TRACER_CPUPROFILE", filepath.Join(dir, "no", "cpu.pprof"))
	t.Setenv("TRACER_MEMPROFILE", "")
	t.Setenv("TRACER_EXECTRACE", filepath.Join(dir, "no", "exec.trace"))
	stop = startProfile(&stderr)
	stop()
	for _, name := range []string{"TRACER_CPUPROFILE", "TRACER_EXECTRACE"} {
		if !bytes.Contains(stderr.Bytes(), []byte(name)) {
			t.Errorf("stderr %q: want the unwritable %s named", stderr.String(), name)
		}
	}
}

// TestStagesHook: TRACER_STAGES has each replay say what its stages cost,
// and the command's time, on stderr.
func TestStagesHook(t *testing.T) {
	t.Setenv("TRACER_STAGES", "1")
	var stderr bytes.Buffer
	stop := startProfile(&stderr)
	code := run(context.Background(), []string{"replay", "--json"}, io.Discard, &stderr)
	stop()
	if code != 0 {
		t.Fatalf("replay of the sample: exit %d, stderr %q", code, stderr.String())
	}
	out := stderr.String()
	for _, want := range []string{"tracer: stages (defaults): CPU ms: read ", ", model ", ", analysis ", "from main to the end"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr %q: want %q", out, want)
		}
	}
	if strings.Count(out, "tracer: stages (") != 1 {
		t.Errorf("stderr %q: want one replay's stages", out)
	}
}

// TestImportStagesHook: TRACER_STAGES has an import say each of its stages
// (CPU, span in the command's wall time, peak RSS so far, and for those
// beside others their thread's minor faults), each once, the serial ones
// in order.
func TestImportStagesHook(t *testing.T) {
	t.Setenv("TRACER_STAGES", "1")
	in := filepath.Join("..", "..", "testdata", "snapshots", "churn__split64__seed2.pickle")
	var stderr bytes.Buffer
	stop := startProfile(&stderr)
	code := run(context.Background(), []string{"import", in, "-o", filepath.Join(t.TempDir(), "out.trace")}, io.Discard, &stderr)
	stop()
	if code != 0 {
		t.Fatalf("import: exit %d, stderr %q", code, stderr.String())
	}
	out := stderr.String()
	at := -1
	for _, name := range []string{"decode", "start state", "empty_cache calls", "validate", "annotate", "write", "close"} {
		line := "tracer: import stage (" + in + ") " + name + ": CPU ms "
		if n := strings.Count(out, line); n != 1 {
			t.Errorf("stderr %q: %q %d times, want once", out, line, n)
			continue
		}
		i := strings.Index(out, line)
		if name != "validate" && name != "annotate" { // beside the writing: they end in any order
			if i < at {
				t.Errorf("stderr %q: %q out of order", out, name)
			}
			at = i
		}
		rest := out[i+len(line):]
		rest = rest[:strings.IndexByte(rest, '\n')]
		if !strings.Contains(rest, "; wall ms from ") || !strings.Contains(rest, "; peak RSS ") {
			t.Errorf("stage %q: %q, want its span and peak RSS", name, rest)
		}
		// A stage beside others says its thread's page faults.
		if beside := strings.Contains(rest, "(its goroutine's)"); beside != strings.Contains(rest, " MiB; minor faults ") {
			t.Errorf("stage %q: %q: its thread's minor faults said %v, want %v", name, rest, !beside, beside)
		}
	}
}

// TestStartProfile_noMemProfile: without TRACER_MEMPROFILE the runtime
// samples no allocations for a memory profile (none is written): no
// stack walks, no buckets.
func TestStartProfile_noMemProfile(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	t.Setenv("TRACER_MEMPROFILE", "")
	t.Setenv("TRACER_CPUPROFILE", "")
	t.Setenv("TRACER_EXECTRACE", "")
	runtime.MemProfileRate = 512 << 10
	startProfile(io.Discard)()
	if runtime.MemProfileRate != 0 {
		t.Errorf("MemProfileRate %d, want 0", runtime.MemProfileRate)
	}
}
