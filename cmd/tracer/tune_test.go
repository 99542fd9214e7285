package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tracer-dev/tracer/record/sample"
)

// tracer tune on the built-in sample: a table, progress on stderr, and last
// the line to paste, the best setting's.
func TestTune_sample(t *testing.T) {
	code, stdout, stderr := tracer(t, "tune")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "PYTORCH_CUDA_ALLOC_CONF=") {
		t.Errorf("last line %q, want PYTORCH_CUDA_ALLOC_CONF=...", last)
	}
	for _, want := range []string{"peak reserved", "(recorded)", "changed nothing for this trace:", "not tried: garbage_collection_threshold"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "built-in sample") || !strings.Contains(stderr, "tune: ") || !strings.Contains(stderr, "descent round 1") {
		t.Errorf("stderr lacks the sample note or progress:\n%s", stderr)
	}
	if _, stdout, _ := tracer(t, "tune", "--json"); strings.Contains(stdout, "null") {
		t.Errorf("null in the JSON:\n%s", stdout)
	}
	var j tuneJSON
	tracerJSON(t, &j, "tune", "--json", "--top", "3")
	if last != j.AllocConfLine || j.AllocConfLine != "PYTORCH_CUDA_ALLOC_CONF="+j.Best.Conf {
		t.Errorf("text line %q, JSON line %q, best %q", last, j.AllocConfLine, j.Best.Conf)
	}
	if len(j.Ranked) != 3 || j.Ranked[0] != j.Best || j.Best.PeakReservedBytes > j.Recorded.PeakReservedBytes {
		t.Errorf("ranked %+v, best %+v, recorded %+v", j.Ranked, j.Best, j.Recorded)
	}
	if !j.Recorded.Recorded || j.Recorded.PeakReservedBytes != 606076928 {
		// mlp_train__default's reserved_bytes.all.peak (README, Exactness).
		t.Errorf("recorded %+v: want the sample's real peak, 606076928", j.Recorded)
	}
}

// JSON arrays are [] when empty, never null, and the fit objective answers
// whether the run fits.
func TestTune_fitJSON(t *testing.T) {
	for _, tc := range []struct {
		limit string
		fits  bool
		ooms  bool // the recorded settings need more
	}{{"24GiB", true, false}, {"570MiB", true, true}, {"100MiB", false, true}} {
		code, stdout, stderr := tracer(t, "tune", "--objective", "fit", "--limit", tc.limit, "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if strings.Contains(stdout, "null") {
			t.Errorf("null in the JSON:\n%s", stdout)
		}
		var j tuneJSON
		tracerJSON(t, &j, "tune", "--objective", "fit", "--limit", tc.limit, "--json")
		if j.Fits == nil || *j.Fits != tc.fits {
			t.Errorf("--limit %s: fits %v, want %v", tc.limit, j.Fits, tc.fits)
		}
		if j.Best.FitBytes <= 0 || j.Best.FitBytes > j.Recorded.FitBytes || j.Objective != "fit" {
			t.Errorf("best needs %d, recorded %d (%s)", j.Best.FitBytes, j.Recorded.FitBytes, j.Objective)
		}
		// Where the recorded settings need more than the limit, their OOMs
		// under it get verdicts, avoided by the settings that fit.
		if (len(j.OOMs) > 0) != tc.ooms {
			t.Errorf("--limit %s: %d OOM verdicts", tc.limit, len(j.OOMs))
		}
		for _, o := range j.OOMs {
			avoided := len(o.AvoidedBy) > 0 && o.AvoidedBy[0] == j.Best.Conf
			if o.Cause == "" || avoided != tc.fits {
				t.Errorf("--limit %s: OOM %+v", tc.limit, o)
			}
		}
	}
	code, stdout, _ := tracer(t, "tune", "--objective", "fit", "--limit", "100MiB")
	if code != 0 || !strings.Contains(stdout, "fits in 100.0 MiB: no") || !strings.Contains(stdout, "needs ") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
}

// Under a limit the defaults exceed, the recorded run's OOMs get their
// verdict and the settings that avoid them.
func TestTune_oomVerdict(t *testing.T) {
	var j tuneJSON
	tracerJSON(t, &j, "tune", "--limit", "570MiB", "--json")
	if len(j.OOMs) == 0 || j.Recorded.OOMs != int64(len(j.OOMs)) {
		t.Fatalf("%d OOMs with verdicts, the recorded settings had %d", len(j.OOMs), j.Recorded.OOMs)
	}
	for _, o := range j.OOMs {
		if o.Cause != "fragmentation" || len(o.AvoidedBy) == 0 || len(o.LiveSites) == 0 || o.CapacityBytes != 570<<20 {
			t.Errorf("OOM at %d: cause %q, capacity %d, avoided by %v, %d live sites", o.Seq, o.Cause, o.CapacityBytes, o.AvoidedBy, len(o.LiveSites))
		}
	}
	if j.Best.OOMs != 0 {
		t.Errorf("best %s has %d OOMs", j.Best.Label, j.Best.OOMs)
	}
}

func TestTune_usage(t *testing.T) {
	for _, args := range [][]string{
		{"tune", "--objective", "peak"},
		{"tune", "--top", "0"},
		{"tune", "-o", "tune.txt"},
		{"tune", "--limit", "lots"},
		{"tune", "a", "b"},
	} {
		if code, _, stderr := tracer(t, args...); code != 2 || strings.Count(stderr, "\n") > 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, stderr)
		}
	}
	if code, _, stderr := tracer(t, "tune", "no-such.arrows"); code != 1 || !strings.Contains(stderr, "no-such.arrows") {
		t.Errorf("a missing trace: exit %d: %s", code, stderr)
	}
	if code, stdout, _ := tracer(t, "tune", "--help"); code != 0 || !strings.Contains(stdout, "tracer tune run.arrows --objective fit") {
		t.Errorf("--help: exit %d:\n%s", code, stdout)
	}
}

// -o draws the picture, and never over the trace.
func TestTune_plot(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "tune.png")
	if code, _, stderr := tracer(t, "tune", "-o", png); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(png)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("%s: %v, %d bytes", png, err, len(b))
	}
	trc := filepath.Join(dir, "t.png") // a trace, whatever its name
	if err := os.WriteFile(trc, sample.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := tracer(t, "tune", trc, "-o", trc); code != 2 || !strings.Contains(stderr, "is the input") {
		t.Errorf("-o the input: exit %d: %s", code, stderr)
	}
	if got, _ := os.ReadFile(trc); !bytes.Equal(got, sample.Bytes()) {
		t.Error("the trace was overwritten")
	}
}

// cancelOn cancels a context, as a signal would, once a line containing
// at is written to it.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	at     string
	cancel context.CancelCauseFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.at) {
		c.cancel(&interrupted{syscall.SIGINT})
	}
	return len(p), nil
}

// Ctrl-C during the search stops it with 130, and no picture is written.
func TestTune_interrupted(t *testing.T) {
	png := filepath.Join(t.TempDir(), "tune.png")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	errw := &cancelOn{at: "descent round 1", cancel: cancel}
	var out bytes.Buffer
	if code := run(ctx, []string{"tune", "-o", png}, &out, errw); code != 130 {
		t.Errorf("exit %d, want 130: %s", code, errw.buf.String())
	}
	if _, err := os.Stat(png); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want no picture", png, err)
	}
	if strings.Contains(out.String(), "PYTORCH_CUDA_ALLOC_CONF=") {
		t.Errorf("a recommendation after the interrupt:\n%s", out.String())
	}
}

// tracer analyze gives each OOM its verdict, in text and JSON, with the
// settings that avoid it.
func TestAnalyze_oomVerdict(t *testing.T) {
	var j struct {
		Devices []struct {
			OOMs []struct {
				Seq       int64    `json:"seq"`
				Cause     string   `json:"cause"`
				Live      int64    `json:"live_bytes"`
				Beside    int64    `json:"free_beside_live_bytes"`
				AvoidedBy []string `json:"avoided_by"`
				LiveSites []struct {
					BlockBytes int64 `json:"block_bytes"`
				} `json:"live_sites"`
			} `json:"ooms"`
		} `json:"devices"`
	}
	tracerJSON(t, &j, "analyze", "--limit", "570MiB", "--json")
	if len(j.Devices) != 1 || len(j.Devices[0].OOMs) == 0 {
		t.Fatalf("no OOMs under 570 MiB: %+v", j)
	}
	for _, o := range j.Devices[0].OOMs {
		if o.Cause != "fragmentation" || o.Live == 0 || o.Beside == 0 || len(o.LiveSites) == 0 || len(o.AvoidedBy) == 0 {
			t.Errorf("OOM %+v: want a fragmentation verdict with live sites and settings that avoid it", o)
		}
	}
	code, stdout, stderr := tracer(t, "analyze", "--limit", "570MiB")
	if code != 0 || !strings.Contains(stdout, "cause: fragmentation") || !strings.Contains(stdout, "avoided by:\n      PYTORCH_CUDA_ALLOC_CONF=") {
		t.Errorf("exit %d: %s\n%s", code, stderr, stdout)
	}
}
