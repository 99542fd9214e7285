package analysis_test

import (
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/trace"
)

func TestRankOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int
		ok   bool
	}{
		{"ddp__default.rank0.pickle", 0, true},
		{"ddp__default.rank1.pickle.gz", 1, true},
		{"out/ddp__default.rank12.arrows", 12, true},
		{"snapshot_rank_3.pickle", 3, true},
		{"snapshot-RANK-7.json", 7, true},
		{"local_rank3_step100.pickle", 3, true},
		{"mem_snapshot_3.pickle", 3, true},
		{"3.pickle", 3, true},
		{"run.rank2.step_9.pickle", 2, true}, // the rank word wins over a trailing number
		{"churn__split64__seed2.pickle", -1, false},
		{"mlp_train__default.pickle", -1, false},
		{"frankly5.pickle", -1, false},
		{"snapshot.pickle", -1, false},
	} {
		got, ok := analysis.RankOf(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("RankOf(%q) = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// A rank stored at import wins over the file name; a bad one is ignored.
func TestTraceRank(t *testing.T) {
	m := trace.Meta{Extra: map[string]string{trace.ExtraRank: "5"}}
	if r, ok := analysis.TraceRank(m, "x.rank2.arrows"); r != 5 || !ok {
		t.Errorf("stored rank: got %d, %v; want 5", r, ok)
	}
	m.Extra[trace.ExtraRank] = "five"
	if r, ok := analysis.TraceRank(m, "x.rank2.arrows"); r != 2 || !ok {
		t.Errorf("bad stored rank: got %d, %v; want the name's 2", r, ok)
	}
}

func row(rank int, alloc, reserved analysis.Bytes) analysis.RankRow {
	return analysis.RankRow{Trace: "t", Rank: rank, PeakAllocated: alloc, PeakReserved: reserved}
}

func TestRanks_spread(t *testing.T) {
	tab := analysis.Ranks([]analysis.RankRow{
		row(3, 100, 400), row(analysis.NoRank, 50, 50), row(0, 100, 200), row(1, 300, 300), row(2, 100, 250),
	})
	var order []int
	for _, r := range tab.Rows {
		order = append(order, r.Rank)
	}
	if got := order; len(got) != 5 || got[0] != 0 || got[3] != 3 || got[4] != analysis.NoRank {
		t.Fatalf("order %v, want 0 1 2 3 -1", got)
	}
	r := tab.Reserved
	// Reserved 200 300 250 400 50: highest rank 3, median 250, lowest the unknown rank's 50.
	if r.HighestRank != 3 || r.HighestBytes != 400 || r.MedianBytes != 250 || r.LowestBytes != 50 ||
		r.LowestRank != analysis.NoRank || r.AboveMedianBytes != 150 || r.AboveLowestBytes != 350 {
		t.Errorf("reserved spread %+v", r)
	}
	if r.AboveMedianRatio != 0.6 || r.AboveLowestRatio != 7 {
		t.Errorf("ratios %g %g, want 0.6 7", r.AboveMedianRatio, r.AboveLowestRatio)
	}
	// Allocated 100 300 100 100 50: ties go to the lowest rank; an even
	// count takes the mean of the middle two.
	tab = analysis.Ranks([]analysis.RankRow{row(1, 200, 0), row(0, 200, 0), row(2, 100, 0), row(3, 50, 0)})
	if a := tab.Allocated; a.HighestRank != 0 || a.MedianBytes != 150 || a.LowestRank != 3 {
		t.Errorf("allocated spread %+v", a)
	}
}

func TestWriteRanks(t *testing.T) {
	var b strings.Builder
	tab := analysis.Ranks([]analysis.RankRow{row(0, 1<<30, 2<<30), row(1, 1<<30, 3<<30), row(2, 1<<30, 2<<30)})
	if err := analysis.WriteRanks(&b, tab); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"reserved peak highest on rank 1: 3.00 GiB, +1.00 GiB (+50.0%) above the median, +1.00 GiB (+50.0%) above the lowest, rank 0",
		"allocated peak: every rank 1.00 GiB",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
	if lines := strings.Count(b.String(), "\n"); lines != 6 {
		t.Errorf("%d lines, want a header, 3 rows and 2 spreads:\n%s", lines, b.String())
	}
}

// A sentence names a row so that it cannot be mistaken for another: by its
// trace when the rank is unknown, with the device when the trace has
// several, with the trace when two traces claim one rank.
func TestWriteRanks_names(t *testing.T) {
	rows := []analysis.RankRow{
		{Trace: "dir/two.arrows", Rank: analysis.NoRank, Device: 0, PeakReserved: 100},
		{Trace: "dir/two.arrows", Rank: analysis.NoRank, Device: 1, PeakReserved: 50},
		{Trace: "a.rank0.arrows", Rank: 0, PeakReserved: 300},
		{Trace: "b.rank0.arrows", Rank: 0, PeakReserved: 200},
	}
	var b strings.Builder
	if err := analysis.WriteRanks(&b, analysis.Ranks(rows)); err != nil {
		t.Fatal(err)
	}
	want := "reserved peak highest on rank 0 (a.rank0.arrows): 300 B, +150 B (+100.0%) above the median, +250 B (+500.0%) above the lowest, two.arrows device 1"
	if !strings.Contains(b.String(), want) {
		t.Errorf("want %q in\n%s", want, b.String())
	}
	if !strings.Contains(b.String(), "rank -: not known") {
		t.Errorf("no note on the unknown ranks:\n%s", b.String())
	}
}
