package tune

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/replay"
)

func sample(t testing.TB) *pipeline.Input {
	t.Helper()
	in, err := pipeline.Open("")
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// importSnapshot imports one of testdata/snapshots into a temporary trace.
func importSnapshot(t testing.TB, name string) *pipeline.Input {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".arrows")
	if _, err := record.ImportSnapshots(context.Background(), []string{"../testdata/snapshots/" + name + ".pickle"},
		record.ImportOptions{Out: out}); err != nil {
		t.Fatal(err)
	}
	in, err := pipeline.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// replayOne replays in under conf (over the defaults) with limit, alone,
// through the pipeline every command uses.
func replayOne(t *testing.T, in *pipeline.Input, conf string, limit int64) Outcome {
	t.Helper()
	r, err := in.Resolve(pipeline.Settings{Conf: conf, FromDefaults: true, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	run, err := pipeline.Replay(context.Background(), in, r, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return outcomeOf(run.Result)
}

// A pass replays every setting as a replay of its own would: the same
// counters on every device.
func TestEvaluate_sameAsReplay(t *testing.T) {
	in := sample(t)
	sets := []Setting{{Conf: ""}, {Conf: "expandable_segments:True"}, {Conf: "max_split_size_mb:64"},
		{Conf: "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"}, {Conf: "large_segment_size_mb:64"},
		{Conf: "garbage_collection_threshold:0.6", Limit: 560 << 20}, {Conf: "", Limit: 500 << 20}}
	if got := evaluateSameAsReplay(t, in, sets); got[len(got)-1].OOMs == 0 {
		t.Error("500 MiB: no OOM; the test wants a setting that fails")
	}
}

// evaluateSameAsReplay evaluates sets on in and fails the test where an
// outcome is not that of a replay of its own; it returns the outcomes.
func evaluateSameAsReplay(t *testing.T, in *pipeline.Input, sets []Setting) []Candidate {
	t.Helper()
	got, err := Evaluate(context.Background(), in, sets)
	if err != nil {
		t.Fatal(err)
	}
	wants := map[Setting]Outcome{}
	for i, s := range sets {
		want, ok := wants[s]
		if !ok {
			want = replayOne(t, in, s.Conf, s.Limit)
			wants[s] = want
		}
		if !got[i].sameAs(&want) || got[i].OOMs != want.OOMs || !reflect.DeepEqual(got[i].OOMSeqs, want.OOMSeqs) {
			t.Errorf("setting %d, %q limit %d: pass %+v, replay %+v", i, s.Conf, s.Limit, got[i].Outcome, want)
		}
	}
	return got
}

// The search is deterministic, its recommendation is the best it tried,
// and the recorded settings reproduce the recording.
func TestSearch_sample(t *testing.T) {
	in := sample(t)
	var r [2]*Report
	for i := range r {
		var err error
		if r[i], err = Search(context.Background(), in, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(r[0].Ranked, r[1].Ranked) {
		t.Fatal("two searches ranked differently")
	}
	rep := r[0]
	if len(rep.Ranked) < 30 {
		t.Errorf("%d settings tried; want the singles and a descent round", len(rep.Ranked))
	}
	for i := 1; i < len(rep.Ranked); i++ {
		if less(Reserved, &rep.Ranked[i], &rep.Ranked[i-1]) < 0 {
			t.Fatalf("ranked %d before %d out of order", i-1, i)
		}
	}
	// The sample was recorded under the defaults: its entry is the
	// defaults', replayed exactly.
	rec := rep.Recorded
	if rec.Conf != "" || !rec.Recorded {
		t.Errorf("recorded entry %q (recorded %v), want the defaults", rec.Conf, rec.Recorded)
	}
	run, err := pipeline.Replay(context.Background(), in, mustResolve(t, in, pipeline.Settings{}), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rec.PeakReservedBytes, run.Result.Devices[0].Stats.ReservedBytes[0].Peak; got != want {
		t.Errorf("recorded peak %d, the replay's %d", got, want)
	}
	best := rep.Best()
	if best.PeakReservedBytes > rec.PeakReservedBytes {
		t.Errorf("best %q reserves %d, more than recorded %d", best.Conf, best.PeakReservedBytes, rec.PeakReservedBytes)
	}
	if rep.Line() != "PYTORCH_CUDA_ALLOC_CONF="+best.Conf {
		t.Errorf("line %q", rep.Line())
	}
	// max_non_split_rounding_mb acts only on requests above
	// max_split_size_mb; the sample's tries of it change nothing.
	found := false
	for _, k := range rep.NoEffect {
		found = found || k == "max_non_split_rounding_mb"
	}
	if !found {
		t.Errorf("no effect: %v; want max_non_split_rounding_mb among them", rep.NoEffect)
	}
	if len(rep.NotTried) != 1 {
		t.Errorf("not tried: %v; want garbage_collection_threshold (no limit)", rep.NotTried)
	}
}

func mustResolve(t *testing.T, in *pipeline.Input, s pipeline.Settings) pipeline.Resolved {
	t.Helper()
	r, err := in.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// With Fit, each setting's limit is the smallest with no OOM: a replay
// under it has none, one a 2 MiB step below has one.
func TestSearch_fit(t *testing.T) {
	in := sample(t)
	rep, err := Search(context.Background(), in, Options{Objective: Fit, Rounds: -1, Limit: 600 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LimitBytes != 600<<20 {
		t.Errorf("limit %d, want the 600 MiB asked about", rep.LimitBytes)
	}
	for i := 1; i < len(rep.Ranked); i++ {
		if rep.Ranked[i].FitBytes >= 0 && rep.Ranked[i].FitBytes < rep.Ranked[i-1].FitBytes {
			t.Fatalf("ranked %d before %d out of order", i-1, i)
		}
	}
	for _, c := range []Candidate{*rep.Best(), rep.Recorded} {
		if c.FitBytes <= 0 || c.FitBytes%fitUnit != 0 {
			t.Fatalf("%s: fit %d", c.Label, c.FitBytes)
		}
		if o := replayOne(t, in, c.Conf, c.FitBytes); o.OOMs != 0 {
			t.Errorf("%s: %d OOMs under its fit %d", c.Label, o.OOMs, c.FitBytes)
		}
		if o := replayOne(t, in, c.Conf, c.FitBytes-fitUnit); o.OOMs == 0 {
			t.Errorf("%s: no OOM 2 MiB under its fit %d", c.Label, c.FitBytes)
		}
		if c.FitBytes > c.PeakReservedBytes+fitUnit {
			t.Errorf("%s: fit %d above its peak without a limit %d", c.Label, c.FitBytes, c.PeakReservedBytes)
		}
	}
}

// Under a limit that the defaults exceed and the best setting fits, the
// recorded run fails and the best setting is named as avoiding it.
func TestSearch_avoids(t *testing.T) {
	in := sample(t)
	fit, err := Search(context.Background(), in, Options{Objective: Fit, Rounds: -1})
	if err != nil {
		t.Fatal(err)
	}
	best, rec := fit.Best(), fit.Recorded
	if best.FitBytes >= rec.FitBytes {
		t.Fatalf("best fit %d, recorded %d: the test wants a setting that needs less", best.FitBytes, rec.FitBytes)
	}
	rep, err := Search(context.Background(), in, Options{Limit: best.FitBytes, Rounds: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recorded.OOMs == 0 {
		t.Fatalf("recorded settings under %d: no OOM", best.FitBytes)
	}
	if rep.Best().OOMs != 0 {
		t.Errorf("best %s: %d OOMs", rep.Best().Label, rep.Best().OOMs)
	}
	avoid := rep.AvoidedBy(rep.Recorded.OOMSeqs[0], 100)
	named := false
	for _, a := range avoid {
		named = named || a == best.Conf
	}
	if !named {
		t.Errorf("avoided by %v; want %s among them", avoid, best.Label)
	}
}

// A real run that hit an OOM under its limit: the search ranks settings
// without it first, and names them for the recorded failure.
func TestSearch_oom(t *testing.T) {
	in := importSnapshot(t, "oom__default__seed1")
	rep, err := Search(context.Background(), in, Options{Rounds: -1})
	if err != nil {
		t.Fatal(err)
	}
	rec := rep.Recorded
	if rec.OOMs != 1 || len(rec.OOMSeqs) != 1 {
		t.Fatalf("recorded: %d OOMs (%v); the run had 1", rec.OOMs, rec.OOMSeqs)
	}
	if rep.LimitBytes == 0 {
		t.Error("no limit: the import infers the run's from its OOM")
	}
	avoid := rep.AvoidedBy(rec.OOMSeqs[0], 3)
	t.Logf("best %s (%d OOMs, %d B); the OOM at %d avoided by %v", rep.Best().Label, rep.Best().OOMs, rep.Best().PeakReservedBytes, rec.OOMSeqs[0], avoid)
	for _, c := range rep.Ranked {
		for _, a := range avoid {
			if c.Conf == a && c.failsAt(rec.OOMSeqs[0]) {
				t.Errorf("%s fails at %d, yet named as avoiding it", a, rec.OOMSeqs[0])
			}
		}
	}
	if rep.Best().OOMs > rec.OOMs {
		t.Errorf("best has %d OOMs, recorded %d", rep.Best().OOMs, rec.OOMs)
	}
	// The run failed under its limit, so it needs more: a limit found with
	// no OOM, above the run's.
	fit, err := Search(context.Background(), in, Options{Objective: Fit, Rounds: -1})
	if err != nil {
		t.Fatal(err)
	}
	if f := fit.Recorded.FitBytes; f <= rep.LimitBytes {
		t.Fatalf("recorded settings fit in %d, yet failed under %d", f, rep.LimitBytes)
	}
	if o := replayOne(t, in, "", fit.Recorded.FitBytes); o.OOMs != 0 {
		t.Errorf("%d OOMs under the fit %d", o.OOMs, fit.Recorded.FitBytes)
	}
}

// A cancelled search stops with the context's error.
func TestSearch_cancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Search(ctx, sample(t), Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// Settings that did exactly the same are one row, named by a setting
// PyTorch takes; a recorded setting PyTorch does not take (a model
// constant) is never the recommendation.
func TestReport_distinct(t *testing.T) {
	dev := func(peak int64) []DeviceOutcome {
		d := DeviceOutcome{}
		d.Stats.ReservedBytes[0].Peak = peak
		return []DeviceOutcome{d}
	}
	cand := func(conf string, rec bool, peak int64) Candidate {
		c := Candidate{Conf: conf, Label: conf, Recorded: rec}
		c.PeakReservedBytes, c.Devices = peak, dev(peak)
		return c
	}
	r := &Report{Ranked: []Candidate{
		cand("tracer_round:4096", true, 100),
		cand("expandable_segments:True", false, 100),
		cand("max_split_size_mb:64,expandable_segments:True", false, 100),
		cand("", false, 120),
	}}
	if b := r.Best(); b.Conf != "expandable_segments:True" {
		t.Errorf("best %q, want expandable_segments:True", b.Conf)
	}
	d := r.Distinct()
	if len(d) != 2 || d[0].Conf != "expandable_segments:True" || d[0].Same != 2 || !d[0].SameAsRecorded || d[0].Recorded ||
		d[1].Conf != "" || d[1].Same != 0 {
		t.Errorf("distinct %+v", d)
	}
}

// The OOMs of a replay's summary are numbered in the replay's events;
// FillAvoidedBy names them by the trace's, which the report's settings
// are checked against.
func TestFillAvoidedBy_replay(t *testing.T) {
	ok, fails := Candidate{Conf: "expandable_segments:True"}, Candidate{Conf: "max_split_size_mb:64"}
	fails.OOMs, fails.OOMSeqs = 1, []int64{70}
	fails.PeakReservedBytes = 1 // ranks after ok
	for i, c := range []*Candidate{&ok, &fails} {
		c.Devices = []DeviceOutcome{{}}
		c.Devices[0].Stats.NumOOMs = int64(i) // not alike
	}
	rep := &Report{Ranked: []Candidate{ok, fails}}
	sum := &analysis.Summary{Device: 0, OOMs: []analysis.OOM{{Seq: 5}, {Seq: 9}}}
	run := &pipeline.Run{Result: &replay.Result{Devices: []replay.DeviceResult{{Device: 0, OOMs: []replay.OOM{{Seq: 70}, {Seq: 80}}}}}}
	FillAvoidedBy(rep, sum, run)
	if sum.OOMs[0].Seq != 70 || sum.OOMs[1].Seq != 80 {
		t.Fatalf("seqs %d, %d; want the trace's 70, 80", sum.OOMs[0].Seq, sum.OOMs[1].Seq)
	}
	if a := sum.OOMs[0].AvoidedBy; !reflect.DeepEqual(a, []string{"expandable_segments:True"}) {
		t.Errorf("70 avoided by %v; max_split_size_mb:64 fails there", a)
	}
	if a := sum.OOMs[1].AvoidedBy; !reflect.DeepEqual(a, []string{"expandable_segments:True", "max_split_size_mb:64"}) {
		t.Errorf("80 avoided by %v; want both, the one with no OOM first", a)
	}
}

// The recorded settings' own values join the knobs' (as PyTorch reads
// them back), so the search varies the run's setting too.
func TestNewSpace(t *testing.T) {
	for _, conf := range []string{"roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", "roundup_power2_divisions:[64:8,>:2]",
		"roundup_power2_divisions:4", "max_split_size_mb:100,garbage_collection_threshold:0.75", "large_segment_size_mb:30,max_non_split_rounding_mb:90"} {
		rec, err := allocator.ParseConf(conf)
		if err != nil {
			t.Fatal(err)
		}
		sp := newSpace(rec)
		// The point of the recorded values is the recorded settings.
		var p point
		for k, kn := range sp {
			for v, val := range kn.values {
				if val != "" && strings.Contains(conf, kn.key+":"+val) || kn.key == "roundup_power2_divisions" && v > 0 && strings.Contains(conf, kn.key) && sameRoundup(t, val, rec) {
					p[k] = uint8(v)
				}
			}
		}
		got, err := allocator.ParseConf(sp.conf(p))
		if err != nil || !sameConf(got, rec) {
			t.Errorf("%s: the space's point %q (%v) is not the recorded settings", conf, sp.conf(p), err)
		}
		for k, kn := range sp {
			if len(kn.values) < len(knobs[k].values) || len(kn.values) > len(knobs[k].values)+1 {
				t.Errorf("%s: %s has %d values, the table %d", conf, kn.key, len(kn.values), len(knobs[k].values))
			}
		}
	}
	if sp := newSpace(allocator.DefaultConf()); !reflect.DeepEqual([]knob(sp), knobs) {
		t.Error("under the defaults the space is not the knob table")
	}
}

func sameRoundup(t *testing.T, val string, rec allocator.Conf) bool {
	c, err := allocator.ParseConf("roundup_power2_divisions:" + val)
	return err == nil && c.RoundupDivisions == rec.RoundupDivisions
}

// A run recorded with a value off the table (large_segment_size_mb:30) is
// a point of the search: the descent may take that value with others.
func TestSearch_recordedValue(t *testing.T) {
	in := importSnapshot(t, "mlp_train__lseg30")
	rep, err := Search(context.Background(), in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recorded.Conf != "large_segment_size_mb:30" || !rep.Recorded.inPts || !rep.Recorded.Recorded {
		t.Errorf("recorded %q (a point: %v)", rep.Recorded.Conf, rep.Recorded.inPts)
	}
}

// Passes over a trace file past the size whose models are made ahead
// (pipeline.Input.BlocksGuess: outside the heap, for the file's guess of
// blocks) replay every setting as a replay of its own would, the second
// pass on the first's replayers, released and prepared again.
func TestEvaluate_preparedSameAsReplay(t *testing.T) {
	out := filepath.Join(t.TempDir(), "churn.arrows")
	src := "alloc b 512 count=6000\nfree b from=1 step=2\nalloc c 3000 count=3000\nalloc d 3MiB count=40\nfree b\nfree c\nfree d\n"
	if err := record.RecordWorkloadSim(context.Background(), "churn.workload", []byte(src), out); err != nil {
		t.Fatal(err)
	}
	in, err := pipeline.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if in.BlocksGuess() == 0 {
		t.Fatal("the trace is too small for its models to be made ahead: the test tests nothing")
	}
	four := []Setting{{Conf: ""}, {Conf: "expandable_segments:True"}, {Conf: "max_split_size_mb:20"}, {Conf: "", Limit: 40 << 20}}
	var sets []Setting
	for len(sets) <= maxPerPass {
		sets = append(sets, four...)
	}
	if got := evaluateSameAsReplay(t, in, sets); got[len(got)-1].OOMs == 0 {
		t.Error("40 MiB: no OOM; the test wants a setting that fails")
	}
}
