package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestPhasesRealSnapshot imports a real snapshot whose program put its
// forward and backward passes in record_function scopes and checks that
// analyze attributes the run to them: each phase ran once a step, the
// phases' live bytes at the allocated peak add up to that peak, and the
// peak is PyTorch's own.
func TestPhasesRealSnapshot(t *testing.T) {
	dir := t.TempDir()
	pickle, tr := filepath.Join(dir, "mlp_phases.pickle"), filepath.Join(dir, "mlp_phases.arrows")
	gunzip(t, "../../testdata/phases/mlp_phases__default.pickle.gz", pickle)
	if code, _, stderr := tracer(t, "import", pickle, "-o", tr); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile("../../testdata/phases/mlp_phases__default.stats.json")
	if err != nil {
		t.Fatal(err)
	}
	var real map[string]any
	if err := json.Unmarshal(raw, &real); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Devices []struct {
			Peaks struct {
				Allocated struct {
					Bytes int64 `json:"bytes"`
				} `json:"allocated"`
			} `json:"peaks"`
			Phases []struct {
				Name       string `json:"name"`
				Runs       int    `json:"runs"`
				Allocs     int    `json:"allocs"`
				LiveAtPeak int64  `json:"live_at_peak_bytes"`
			} `json:"phases"`
			AllocatedPeakPhase string `json:"allocated_peak_phase"`
		} `json:"devices"`
	}
	tracerJSON(t, &out, "analyze", tr, "--json")
	if len(out.Devices) != 1 {
		t.Fatalf("%d devices", len(out.Devices))
	}
	d := out.Devices[0]
	if want := int64(real["allocated_bytes.all.peak"].(float64)); d.Peaks.Allocated.Bytes != want {
		t.Errorf("allocated peak %d, PyTorch's %d", d.Peaks.Allocated.Bytes, want)
	}
	runs := map[string]int{}
	var live int64
	for _, p := range d.Phases {
		runs[p.Name] = p.Runs
		live += p.LiveAtPeak
		if p.Name == "forward" || p.Name == "backward" {
			if p.Allocs == 0 {
				t.Errorf("phase %s allocated nothing", p.Name)
			}
		}
	}
	for _, name := range []string{"forward", "backward", "Optimizer.step#Adam.step"} {
		if runs[name] != 8 {
			t.Errorf("phase %s ran %d times, want 8 (one a step): %v", name, runs[name], runs)
		}
	}
	if live != d.Peaks.Allocated.Bytes {
		t.Errorf("live at the peak by phase adds up to %d, the peak is %d", live, d.Peaks.Allocated.Bytes)
	}
	if d.AllocatedPeakPhase != "Optimizer.step#Adam.step" {
		t.Errorf("allocated peak in %q, want the optimizer step", d.AllocatedPeakPhase)
	}
}
