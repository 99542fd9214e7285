package main

import (
	"bytes"
	"os"
	"path/filepath"
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
