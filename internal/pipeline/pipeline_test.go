package pipeline

import (
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
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
