package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// diffOut is what the tests read of tracer diff --json.
type diffOut struct {
	A, B    string
	Devices []struct {
		DeviceA int32 `json:"device_a"`
		DeviceB int32 `json:"device_b"`
		Stats   []struct {
			Key          string
			A, B, Change int64
		}
		Sites []struct {
			Site        string   `json:"site"`
			Frames      []string `json:"frames"`
			ABytes      int64    `json:"a_bytes"`
			BBytes      int64    `json:"b_bytes"`
			ChangeBytes int64    `json:"change_bytes"`
		}
		RestSites int `json:"rest_sites"`
		Rest      struct {
			ChangeBytes int64 `json:"change_bytes"`
		}
	}
	Unpaired []string `json:"unpaired_devices"`
}

func (d *diffOut) stat(key string) (a, b, change int64) {
	for _, s := range d.Devices[0].Stats {
		if s.Key == key {
			return s.A, s.B, s.Change
		}
	}
	return -1, -1, -1
}

// One real program (causal attention inference, recorded with stacks)
// under two settings: roundup_power2_divisions:8 rounds the requests up,
// and the diff shows which of the program's lines hold the extra memory.
// Every figure is each trace's own (tracer info), and the sites' changes
// add up to the change of the allocated peak.
func TestDiffSettings(t *testing.T) {
	dir := t.TempDir()
	a := importSnapshot(t, dir, "attention_infer__default")
	b := importSnapshot(t, dir, "attention_infer__pow2div8")
	var d diffOut
	tracerJSON(t, &d, "diff", a, b, "--json", "--top", "0")
	if len(d.Devices) != 1 || len(d.Unpaired) != 0 {
		t.Fatalf("%d devices compared, unpaired %v", len(d.Devices), d.Unpaired)
	}
	var info [2]struct {
		Stats map[string]int64 `json:"stats"`
	}
	tracerJSON(t, &info[0], "info", a, "--json")
	tracerJSON(t, &info[1], "info", b, "--json")
	for _, k := range []string{"allocated_bytes.all.peak", "reserved_bytes.all.peak", "num_device_alloc", "segment.all.peak", "num_ooms"} {
		if va, vb, ch := d.stat(k); va != info[0].Stats[k] || vb != info[1].Stats[k] || ch != vb-va {
			t.Errorf("%s: diff says %d → %d (%+d), info %d → %d", k, va, vb, ch, info[0].Stats[k], info[1].Stats[k])
		}
	}
	pa, pb, grew := d.stat("allocated_bytes.all.peak")
	var sumA, sumB, sum int64
	sites := d.Devices[0].Sites
	for i, s := range sites {
		sumA, sumB, sum = sumA+s.ABytes, sumB+s.BBytes, sum+s.ChangeBytes
		if i > 0 && abs64(s.ChangeBytes) > abs64(sites[i-1].ChangeBytes) {
			t.Errorf("site %d (%s, %+d) after a smaller change", i, s.Site, s.ChangeBytes)
		}
	}
	// --top 0 lists every site that changed; the unchanged ones hold as
	// much on both sides, so the changes alone make the peak's change.
	if sum != grew || grew <= 0 || sumA > pa || sumB > pb {
		t.Errorf("sites change by %+d in all (A %d of %d, B %d of %d); the allocated peak by %+d", sum, sumA, pa, sumB, pb, grew)
	}
	if len(sites) < 2 || !strings.HasPrefix(sites[0].Site, "workloads.py:") || len(sites[0].Frames) == 0 {
		t.Errorf("sites %+v; want the program's lines, with frames", sites)
	}
	var top diffOut
	tracerJSON(t, &top, "diff", a, b, "--json", "--top", "1")
	if td := top.Devices[0]; len(td.Sites) != 1 || td.RestSites != len(sites)-1 || td.Rest.ChangeBytes != grew-sites[0].ChangeBytes {
		t.Errorf("--top 1: %d sites, rest %d sites %+d", len(td.Sites), td.RestSites, td.Rest.ChangeBytes)
	}
	code, stdout, stderr := tracer(t, "diff", a, b)
	if code != 0 || !strings.Contains(stdout, "live at the allocated peak, by site") || !strings.Contains(stdout, sites[0].Site) {
		t.Errorf("text: exit %d %s\n%s", code, stderr, stdout)
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Two ranks of a real DDP run under a memory limit, each on its own GPU:
// their one device each is compared, and every figure is what PyTorch
// reported for that rank (rank 0 retried a cudaMalloc once and peaked
// 28 MiB higher).
func TestDiffRanks(t *testing.T) {
	// The run's limit, which snapshots do not store (testdata/pairs).
	dir := importDDP(t, "retry", "--fraction", "0.0022213538994846093", "--total-memory", "150109880320")
	var truth [2]pairRun
	for i := range truth {
		truth[i].readStats(t, filepath.Join(ddpSource("retry"), fmt.Sprintf("ddp__retry.rank%d.stats.json", i)))
	}
	var d diffOut
	tracerJSON(t, &d, "diff", filepath.Join(dir, "ddp__retry.rank0.arrows"), filepath.Join(dir, "ddp__retry.rank1.arrows"), "--json")
	if len(d.Devices) != 1 || d.Devices[0].DeviceA != 0 || d.Devices[0].DeviceB != 1 {
		t.Fatalf("devices %+v", d.Devices)
	}
	if _, _, ch := d.stat("reserved_bytes.all.peak"); ch != -28<<20 {
		t.Errorf("reserved peak change %d, want -28 MiB", ch)
	}
	checked := 0
	for _, s := range d.Devices[0].Stats {
		wa, okA := truth[0].stats[s.Key]
		wb, okB := truth[1].stats[s.Key]
		if !okA || !okB {
			continue
		}
		checked++
		if s.A != wa || s.B != wb {
			t.Errorf("%s: diff %d and %d, PyTorch %d and %d", s.Key, s.A, s.B, wa, wb)
		}
	}
	if checked < 10 {
		t.Errorf("only %d keys checked against PyTorch", checked)
	}
	if s := d.Devices[0].Sites; len(s) != 1 || s[0].Site != "(no stack)" {
		t.Errorf("a run recorded without stacks has one site, (no stack): %+v", s)
	}
	code, stdout, _ := tracer(t, "diff", filepath.Join(dir, "ddp__retry.rank0.arrows"), filepath.Join(dir, "ddp__retry.rank1.arrows"))
	if code != 0 || !strings.Contains(stdout, "recorded without stacks") {
		t.Errorf("the text does not say why there is one site:\n%s", stdout)
	}
	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"diff", dir}, 2, "two traces"},
		{[]string{"diff", "a", "b", "c"}, 2, "two traces"},
		{[]string{"diff", filepath.Join(dir, "ddp__retry.rank0.arrows"), filepath.Join(dir, "missing.arrows")}, 1, "missing.arrows"},
		{[]string{"diff", "--top", "-1", "a", "b"}, 2, "--top"},
	} {
		code, _, stderr := tracer(t, tc.args...)
		if code != tc.code || !strings.Contains(strings.SplitN(stderr, "\n", 2)[0], tc.say) {
			t.Errorf("%v: exit %d, %q; want %d saying %q", tc.args, code, stderr, tc.code, tc.say)
		}
	}
}

// A trace cut short (a killed recording) is compared on its whole batches,
// and diff says so, as the other commands do; so does info's table by rank.
func TestDiffCutShort(t *testing.T) {
	dir := t.TempDir()
	good, cut := filepath.Join(dir, "good.arrows"), filepath.Join(dir, "cut.arrows")
	if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, "mlp_train__default.pickle"), "-o", good); code != 0 {
		t.Fatalf("import: %s", stderr)
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, raw[:len(raw)*7/10], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"diff", good, cut}, {"info", good, cut}} {
		code, _, stderr := tracer(t, args...)
		if code != 0 || !strings.Contains(stderr, "cut.arrows ends without its end-of-stream marker") {
			t.Errorf("tracer %s: exit %d, stderr %q: want a warning that cut.arrows is cut short", args[0], code, stderr)
		}
	}
}
