package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A snapshot's record_function scopes reach analyze through import, as
// recorded and in a replay under other settings, in text and JSON.
func TestAnalyzePhases(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mlp.arrows")
	if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, "mlp_train__default.pickle"), "-o", out); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	type phase struct {
		Name             string `json:"name"`
		Runs             int64  `json:"runs"`
		LiveAtPeakBytes  int64  `json:"live_at_peak_bytes"`
		PeakAllocatedMax int64  `json:"peak_allocated_bytes"`
	}
	var r struct {
		Devices []struct {
			Phases             []phase `json:"phases"`
			AllocatedPeakPhase string  `json:"allocated_peak_phase"`
			Peaks              struct {
				Allocated struct {
					Bytes int64 `json:"bytes"`
				} `json:"allocated"`
			} `json:"peaks"`
		} `json:"devices"`
	}
	// A replayed trace keeps the annotations: its requests keep their times.
	replayed := filepath.Join(t.TempDir(), "r.arrows")
	if code, _, stderr := tracer(t, "replay", out, "--conf", "expandable_segments:True", "-o", replayed); code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{{"analyze", out, "--json"}, {"analyze", out, "--json", "--conf", "expandable_segments:True"}, {"analyze", replayed, "--json"}} {
		tracerJSON(t, &r, args...)
		d := r.Devices[0]
		if len(d.Phases) != 3 || d.Phases[0].Name != "Optimizer.step#Adam.step" || d.Phases[0].Runs != 8 ||
			d.Phases[1].Name != "Optimizer.zero_grad#Adam.zero_grad" || d.Phases[2].Name != "(outside any scope)" {
			t.Fatalf("%s: phases %+v", strings.Join(args, " "), d.Phases)
		}
		var live int64
		for _, p := range d.Phases {
			live += p.LiveAtPeakBytes
		}
		if live != d.Peaks.Allocated.Bytes {
			t.Errorf("%s: phases hold %d bytes at the allocated peak, want all %d", strings.Join(args, " "), live, d.Peaks.Allocated.Bytes)
		}
		if d.AllocatedPeakPhase != "Optimizer.step#Adam.step" {
			t.Errorf("%s: allocated peak in %q", strings.Join(args, " "), d.AllocatedPeakPhase)
		}
	}
	code, stdout, _ := tracer(t, "analyze", out)
	if code != 0 || !strings.Contains(stdout, "\nOptimizer.step#Adam.step      8  67.35 ms   549.7 MiB") {
		t.Errorf("analyze: exit %d, no phase table:\n%s", code, stdout)
	}
	var info struct {
		Scopes []struct {
			Name    string `json:"name"`
			Entered int64  `json:"entered"`
		} `json:"scopes"`
	}
	tracerJSON(t, &info, "info", out, "--json")
	if len(info.Scopes) != 2 || info.Scopes[0].Name != "Optimizer.step#Adam.step" || info.Scopes[0].Entered != 8 {
		t.Errorf("info --json scopes %+v, want the two optimizer scopes, 8 each", info.Scopes)
	}
	// A snapshot without annotations has an empty list, not null.
	noAnn := filepath.Join(t.TempDir(), "oom.arrows")
	if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, "oom__default__seed1.pickle"), "-o", noAnn); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	code, stdout, _ = tracer(t, "analyze", noAnn, "--json")
	if code != 0 || !strings.Contains(stdout, `"phases": []`) {
		t.Errorf("analyze --json of a trace without annotations: exit %d, want \"phases\": []", code)
	}
	code, stdout, _ = tracer(t, "info", noAnn, "--json")
	if code != 0 || !strings.Contains(stdout, `"scopes": []`) {
		t.Errorf("info --json of a trace without annotations: exit %d, want \"scopes\": []", code)
	}
}
