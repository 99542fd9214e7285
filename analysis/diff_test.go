package analysis_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/trace"
)

func site(stack trace.StackID, file string, line int32, bytes analysis.Bytes, n int64) analysis.Site {
	return analysis.Site{Stack: stack, Frames: []trace.Frame{{Name: "f", File: file, Line: line}},
		BlockBytes: bytes, RequestedBytes: bytes, Count: n}
}

// Sites are matched by their frames, not their stack ids (which differ
// between traces), sorted by the size of their change, and the sites
// beyond the top are summed in Rest.
func TestCompare(t *testing.T) {
	a := &analysis.Summary{Device: 0, Stats: map[string]int64{"allocated_bytes.all.peak": 700, "num_ooms": 1},
		Sites: []analysis.Site{
			site(1, "model.py", 10, 300, 3),
			site(2, "model.py", 20, 200, 2),
			site(3, "opt.py", 5, 100, 1),
			{Stack: trace.NoStack, BlockBytes: 100, Count: 1},
		}}
	b := &analysis.Summary{Device: 1, Stats: map[string]int64{"allocated_bytes.all.peak": 1000, "num_alloc_retries": 2},
		Sites: []analysis.Site{
			site(7, "opt.py", 5, 100, 1),     // unchanged, another stack id
			site(8, "model.py", 20, 650, 4),  // grew by 450
			site(9, "model.py", 10, 150, 1),  // shrank by 150
			site(4, "data.py", 1, 100, 1),    // new: grew by 100
			{Stack: trace.NoStack, Count: 0}, // the blocks without stacks are gone: shrank by 100
		}}
	d := analysis.Compare(a, b, 0)
	var got []string
	for _, c := range d.Sites {
		got = append(got, fmt.Sprintf("%s %+d", c.Site, c.ChangeBytes))
	}
	want := "model.py:20 f +450|model.py:10 f -150|(no stack) -100|data.py:1 f +100"
	if strings.Join(got, "|") != want {
		t.Errorf("sites\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	if d.Unchanged != 1 || d.RestSites != 0 {
		t.Errorf("unchanged %d, rest %d; want 1, 0", d.Unchanged, d.RestSites)
	}
	if c := d.Sites[0]; c.ABytes != 200 || c.BBytes != 650 || c.ACount != 2 || c.BCount != 4 || c.Frames[0] != "model.py:20 f" {
		t.Errorf("first site %+v", c)
	}
	stats := map[string]analysis.StatChange{}
	for _, s := range d.Stats {
		stats[s.Key] = s
	}
	if s := stats["allocated_bytes.all.peak"]; s.A != 700 || s.B != 1000 || s.Change != 300 {
		t.Errorf("allocated peak %+v", s)
	}
	if s := stats["num_alloc_retries"]; s.A != 0 || s.B != 2 || len(d.Stats) != 3 {
		t.Errorf("a key one side lacks counts as 0 there: %+v; %d stats, want 3", s, len(d.Stats))
	}

	top := analysis.Compare(a, b, 2)
	if len(top.Sites) != 2 || top.RestSites != 2 || top.Rest.ChangeBytes != 0 || top.Rest.ABytes != 100 || top.Rest.BBytes != 100 {
		t.Errorf("top 2: %d sites, rest %d sites %+v", len(top.Sites), top.RestSites, top.Rest)
	}
	var text strings.Builder
	if err := analysis.WriteDiff(&text, top, "a.arrows", "b.arrows"); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"A: a.arrows, device 0", "allocated peak", "+300 B (+42.9%)", "4 changed, largest change first; 1 unchanged", "(2 other sites)"} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("text lacks %q:\n%s", line, text.String())
		}
	}
}

func TestPairDevices(t *testing.T) {
	sum := func(d int32) *analysis.Summary { return &analysis.Summary{Device: d} }
	pairs, un := analysis.PairDevices([]*analysis.Summary{sum(0)}, []*analysis.Summary{sum(1)})
	if len(pairs) != 1 || pairs[0][1].Device != 1 || len(un) != 0 {
		t.Errorf("one device each: %v %v", pairs, un)
	}
	pairs, un = analysis.PairDevices([]*analysis.Summary{sum(0), sum(1)}, []*analysis.Summary{sum(1), sum(2)})
	if len(pairs) != 1 || pairs[0][0].Device != 1 || strings.Join(un, ",") != "A device 0,B device 2" {
		t.Errorf("by ordinal: %v %v", pairs, un)
	}
}
