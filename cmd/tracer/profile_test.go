package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartProfile: TRACER_CPUPROFILE and TRACER_MEMPROFILE write their
// profiles when the command ends, and a profile that cannot be written is
// said on stderr without stopping anything.
func TestStartProfile(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	t.Setenv("TRACER_CPUPROFILE", cpu)
	t.Setenv("TRACER_MEMPROFILE", mem)
	var stderr bytes.Buffer
	stop := startProfile(&stderr)
	stop()
	for _, p := range []string{cpu, mem} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (want a profile)", p, err)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %q", stderr.String())
	}
	t.Setenv("TRACER_CPUPROFILE", filepath.Join(dir, "no", "cpu.pprof"))
	t.Setenv("TRACER_MEMPROFILE", "")
	stop = startProfile(&stderr)
	stop()
	if !bytes.Contains(stderr.Bytes(), []byte("TRACER_CPUPROFILE")) {
		t.Errorf("stderr %q: want the unwritable profile named", stderr.String())
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
