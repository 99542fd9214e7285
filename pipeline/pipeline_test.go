package pipeline

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

func TestParseConf_modelKeys(t *testing.T) {
	c, err := parseConf("expandable_segments:True,tracer_round:4096,tracer_small_size:2097152,tracer_small_segment:4194304")
	if err != nil {
		t.Fatal(err)
	}
	if !c.ExpandableSegments || c.MinBlockSize != 4096 || c.SmallSize != 2<<20 || c.SmallBuffer != 4<<20 {
		t.Errorf("parsed %+v", c)
	}
	// What Conf.String writes, parseConf reads back.
	back, err := parseConf(c.String())
	if err != nil || back.MinBlockSize != 4096 || !back.ExpandableSegments {
		t.Errorf("round trip of %q: %+v, %v", c.String(), back, err)
	}
	for _, bad := range []struct{ conf, say string }{
		{"tracer_round:1000", "power of two"},
		{"tracer_small_segment:1024", "small segment size"},
		{"tracer_bogus:1", "unrecognized key"},
		{"tracer_round:lots", "integer"},
		{"max_split_size_mb:5", "must be >= 20"},
	} {
		if _, err := parseConf(bad.conf); err == nil || !strings.Contains(err.Error(), bad.say) {
			t.Errorf("parseConf(%q) = %v, want an error saying %q", bad.conf, err, bad.say)
		}
	}
}

func TestResolve(t *testing.T) {
	in, err := Open("") // the built-in sample, recorded with the defaults
	if err != nil {
		t.Fatal(err)
	}
	base, err := in.RecordedSettings()
	if err != nil || !base.Recorded || base.Label != "defaults" {
		t.Fatalf("recorded settings: %+v, %v", base, err)
	}
	r, err := in.Resolve(Settings{Conf: "expandable_segments:True", Round: 4096, Limit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if r.Recorded || !r.Conf.ExpandableSegments || r.Conf.MinBlockSize != 4096 || r.Limit != 1<<30 {
		t.Errorf("resolved %+v", r)
	}
	if want := allocator.DefaultConf(); base.Conf.MinBlockSize != want.MinBlockSize {
		t.Errorf("recorded quantum %d", base.Conf.MinBlockSize)
	}
	if _, err := in.Resolve(Settings{Round: 3}); err == nil {
		t.Error("a quantum of 3 bytes was accepted")
	}
}

// --from-defaults drops the recorded keys --conf does not name; without it
// --conf applies over them.
func TestResolveFromDefaults(t *testing.T) {
	in, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	in.Meta.AllocConf = "garbage_collection_threshold:0.6,max_split_size_mb:64"
	over, err := in.Resolve(Settings{Conf: "expandable_segments:True"})
	if err != nil {
		t.Fatal(err)
	}
	if !over.Conf.ExpandableSegments || over.Conf.GCThreshold != 0.6 || over.Conf.MaxSplitSize != 64<<20 {
		t.Errorf("--conf over the recorded keys: %+v", over.Conf)
	}
	fresh, err := in.Resolve(Settings{Conf: "expandable_segments:True", FromDefaults: true})
	if err != nil {
		t.Fatal(err)
	}
	want := allocator.DefaultConf()
	if !fresh.Conf.ExpandableSegments || fresh.Conf.GCThreshold != want.GCThreshold || fresh.Conf.MaxSplitSize != want.MaxSplitSize || fresh.Recorded {
		t.Errorf("--from-defaults: %+v, recorded %v", fresh.Conf, fresh.Recorded)
	}
	if d, err := in.Resolve(Settings{FromDefaults: true}); err != nil || d.Label != "defaults" {
		t.Errorf("--from-defaults alone: %q, %v", d.Label, err)
	}
}

// TestReplayReuse replays the sample under several settings one after
// another on one Replayer, as tracer plot compare does, and checks every
// replay against one without: the same summaries and results.
func TestReplayReuse(t *testing.T) {
	in, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	var rp replay.Replayer
	for _, s := range []Settings{{}, {Conf: "expandable_segments:True"}, {Round: 4096}, {Limit: 1 << 30}, {}} {
		r, err := in.Resolve(s)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Replay(context.Background(), in, r, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Replay(context.Background(), in, r, Options{Replayer: &rp})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(want.Summaries, got.Summaries) {
			t.Errorf("%s: the summaries differ on a Replayer", r.Label)
		}
		if len(want.Result.Devices) != len(got.Result.Devices) {
			t.Fatalf("%s: %d devices, %d on a Replayer", r.Label, len(want.Result.Devices), len(got.Result.Devices))
		}
		for i := range want.Result.Devices {
			w, g := want.Result.Devices[i], got.Result.Devices[i]
			if w.Stats != g.Stats || w.Events != g.Events || w.NumMismatches != g.NumMismatches || len(w.OOMs) != len(g.OOMs) {
				t.Errorf("%s: device %d: %+v, on a Replayer %+v", r.Label, w.Device, w, g)
			}
		}
	}
}

// KEY:none removes a recorded key (PyTorch has no value that does); a key
// no one knows is refused; -1, 0 or nothing for a key hint at none.
func TestResolveUnset(t *testing.T) {
	in := &Input{Name: "t", Meta: trace.Meta{AllocConf: "max_split_size_mb:32,roundup_power2_divisions:[256:1,>:4],expandable_segments:True"}}
	for _, tc := range []struct{ conf, label, err string }{
		{"max_split_size_mb:none", "expandable_segments:True,roundup_power2_divisions:[256:1,>:4]", ""},
		{"max_split_size_mb:None,roundup_power2_divisions:none", "expandable_segments:True", ""},
		{"roundup_power2_divisions:none, garbage_collection_threshold:0.5", "expandable_segments:True,garbage_collection_threshold:0.5,max_split_size_mb:32", ""},
		{"bogus:none", "", "bogus:none: no such key to remove"},
		{"max_split_size_mb:0", "", "to remove a recorded max_split_size_mb, say max_split_size_mb:none"},
	} {
		r, err := in.Resolve(Settings{Conf: tc.conf})
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("--conf %s: %v, want an error with %q", tc.conf, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("--conf %s: %v", tc.conf, err)
		case tc.err == "" && !sameConf(t, r.Conf, tc.label):
			t.Errorf("--conf %s: %s, want %s", tc.conf, r.Conf.String(), tc.label)
		}
	}
}

// sameConf reports whether c is the conf s parses to.
func sameConf(t *testing.T, c allocator.Conf, s string) bool {
	want, err := parseConf(s)
	if err != nil {
		t.Fatal(err)
	}
	return confEqual(c, want)
}

// Observe sees every replayed event in order, and Run.Stacks resolves
// their stacks.
func TestReplay_observe(t *testing.T) {
	in, r := sampleAt(t, Settings{Round: 4096})
	var n, withStack int64
	lastSeq := int64(-1)
	run, err := Replay(context.Background(), in, r, Options{Observe: func(ev *trace.Event) {
		if ev.Seq <= lastSeq {
			t.Errorf("event seq %d after %d", ev.Seq, lastSeq)
		}
		lastSeq = ev.Seq
		n++
		if ev.Stack >= 0 {
			withStack++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n != run.Summaries[0].Events || withStack == 0 || len(run.Stacks) == 0 {
		t.Errorf("observed %d events (%d with a stack), summarized %d; %d stacks", n, withStack, run.Summaries[0].Events, len(run.Stacks))
	}
}

// Options.SkipCompare replays as the comparison does but counts no
// mismatches: a replay taken for the recorded one under settings that
// differ (the sample with a 4 KiB quantum) mismatches when compared, and
// gives the same stats without the comparison.
func TestReplay_skipCompare(t *testing.T) {
	in, r := sampleAt(t, Settings{Round: 4096})
	r.Recorded = true // as if these were the recorded settings
	compared, err := Replay(context.Background(), in, r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	skipped, err := Replay(context.Background(), in, r, Options{SkipCompare: true})
	if err != nil {
		t.Fatal(err)
	}
	if compared.Result.Devices[0].NumMismatches == 0 {
		t.Fatal("the compared replay found no mismatch: the test shows nothing")
	}
	if n := skipped.Result.Devices[0].NumMismatches; n != 0 {
		t.Errorf("SkipCompare counted %d mismatches", n)
	}
	if got, want := skipped.Result.Devices[0].Stats.Map(), compared.Result.Devices[0].Stats.Map(); !reflect.DeepEqual(got, want) {
		t.Errorf("stats differ without the comparison:\n got %v\nwant %v", got, want)
	}
}

// ReplayEach's replays, reading the trace once, are the replays Replay
// makes one at a time: results, summaries and facts.
func TestReplayEach(t *testing.T) {
	in, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	base, err := in.RecordedSettings()
	if err != nil {
		t.Fatal(err)
	}
	want, err := in.Resolve(Settings{Conf: "expandable_segments:True"})
	if err != nil {
		t.Fatal(err)
	}
	sets := []Resolved{want, base}
	opts := []Options{{}, {SkipCompare: true}}
	runs, err := ReplayEach(context.Background(), in, sets, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sets {
		one, err := Replay(context.Background(), in, s, opts[i])
		if err != nil {
			t.Fatal(err)
		}
		got := runs[i]
		if !reflect.DeepEqual(got.Result.Devices[0].Stats.Map(), one.Result.Devices[0].Stats.Map()) ||
			got.Result.Devices[0].Events != one.Result.Devices[0].Events || got.Result.Devices[0].NumMismatches != one.Result.Devices[0].NumMismatches {
			t.Errorf("%s: result differs from Replay's", s.Label)
		}
		if !reflect.DeepEqual(got.Summaries, one.Summaries) || !reflect.DeepEqual(got.Facts, one.Facts) {
			t.Errorf("%s: summaries or facts differ from Replay's", s.Label)
		}
	}
	if runs[0].Result.Devices[0].Stats.Map()["reserved_bytes.all.peak"] == runs[1].Result.Devices[0].Stats.Map()["reserved_bytes.all.peak"] {
		t.Error("the two settings reserved alike: the test shows nothing")
	}
}

// ReplayEach of no settings replays nothing, and one with an option
// missing says so.
func TestReplayEach_counts(t *testing.T) {
	in, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	if runs, err := ReplayEach(context.Background(), in, nil, nil); len(runs) != 0 || err != nil {
		t.Errorf("no settings: %d runs, %v", len(runs), err)
	}
	base, err := in.RecordedSettings()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReplayEach(context.Background(), in, []Resolved{base, base}, []Options{{}}); err == nil || !strings.Contains(err.Error(), "2 settings with 1 options") {
		t.Errorf("an option missing: %v", err)
	}
}

// sampleAt opens the built-in sample and resolves settings s for it.
func sampleAt(t *testing.T, s Settings) (*Input, Resolved) {
	t.Helper()
	in, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	r, err := in.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	return in, r
}
