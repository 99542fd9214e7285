package analysis

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tracer-dev/tracer/trace"
)

// NoRank is the Rank of a trace whose rank is not known.
const NoRank = -1

// The expressions are compiled at first use, not at package init.
var (
	// rankWord finds "rank3", "rank_3", "rank-3" or "rank.3", the last one
	// in a name that has several.
	rankWord = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)(?:^|[^a-z])rank[_.-]?([0-9]{1,6})(?:[^0-9]|$)`)
	})
	// rankTail finds a number ending the name after a separator
	// ("snapshot_3"), or making all of it ("3").
	rankTail = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|[_.-])([0-9]{1,5})$`) })
)

// rankExts are the extensions RankOf strips before it looks for a number
// at the end of a name.
var rankExts = []string{".gz", ".pickle", ".pkl", ".json", ".arrows", ".arrow"}

// RankOf reads a distributed rank from a file name: "rank3", "rank_3",
// "rank-3" or "rank.3" anywhere in it (in any case), else a number that
// ends its stem after a separator ("snapshot_3.pickle") or is all of it
// ("3.pickle"). PyTorch's snapshots do not record the rank; torchrun
// scripts put it in the file name.
func RankOf(path string) (int, bool) {
	name := filepath.Base(path)
	for {
		ext := strings.ToLower(filepath.Ext(name))
		if !slices.Contains(rankExts, ext) {
			break
		}
		name = name[:len(name)-len(ext)]
	}
	m := rankWord().FindAllStringSubmatch(name, -1)
	if len(m) == 0 {
		m = rankTail().FindAllStringSubmatch(name, -1)
	}
	if len(m) == 0 {
		return NoRank, false
	}
	r, err := strconv.Atoi(m[len(m)-1][1])
	return r, err == nil
}

// TraceRank is the rank of the trace at path with metadata m: the one
// stored at import (trace.ExtraRank), else what its file name says (RankOf).
func TraceRank(m trace.Meta, path string) (int, bool) {
	if v, ok := m.Extra[trace.ExtraRank]; ok {
		if r, err := strconv.Atoi(v); err == nil && r >= 0 {
			return r, true
		}
	}
	return RankOf(path)
}

// RankRow is one rank's figures in a per-rank table: one device of one
// trace (a rank's trace usually holds the rank's own device only).
type RankRow struct {
	Trace  string `json:"trace"`
	Rank   int    `json:"rank"` // NoRank (-1) when unknown
	Device int32  `json:"device"`

	PeakAllocated Bytes `json:"peak_allocated_bytes"`
	PeakReserved  Bytes `json:"peak_reserved_bytes"`
	// ExternalFrag is the reserved peak less the most allocated during it
	// (Fragmentation.ExternalAtReservedPeak), ExternalFragRatio its share
	// of the reserved peak.
	ExternalFrag      Bytes   `json:"external_frag_at_reserved_peak_bytes"`
	ExternalFragRatio float64 `json:"external_frag_ratio"`
	// GMLake is 1 − peak active / peak reserved.
	GMLake      float64 `json:"gmlake_ratio"`
	OOMs        int64   `json:"ooms"`
	Approximate bool    `json:"approximate"`
}

// RankRowOf is the row of device sum.Device of the trace named name.
func RankRowOf(name string, rank int, sum *Summary) RankRow {
	return RankRow{
		Trace: name, Rank: rank, Device: sum.Device,
		PeakAllocated: sum.Peaks.Allocated.Bytes, PeakReserved: sum.Peaks.Reserved.Bytes,
		ExternalFrag: sum.Fragmentation.ExternalAtReservedPeak, ExternalFragRatio: sum.Fragmentation.ExternalRatio,
		GMLake: sum.Fragmentation.GMLake, OOMs: sum.Stats["num_ooms"], Approximate: sum.Approximate,
	}
}

// RankSpread says which rank peaks highest and by how much it is above
// the median and the lowest rank's peak: in data-parallel training every
// rank should do the same work, and the one that peaks highest is the one
// that runs out of memory first.
type RankSpread struct {
	Highest          int     `json:"highest_row"` // index in RankTable.Rows
	HighestRank      int     `json:"highest_rank"`
	HighestBytes     Bytes   `json:"highest_bytes"`
	MedianBytes      Bytes   `json:"median_bytes"`
	Lowest           int     `json:"lowest_row"`
	LowestRank       int     `json:"lowest_rank"`
	LowestBytes      Bytes   `json:"lowest_bytes"`
	AboveMedianBytes Bytes   `json:"above_median_bytes"`
	AboveMedianRatio float64 `json:"above_median_ratio"` // AboveMedianBytes / MedianBytes; 0 when the median is 0
	AboveLowestBytes Bytes   `json:"above_lowest_bytes"`
	AboveLowestRatio float64 `json:"above_lowest_ratio"`
}

// RankTable is a per-rank table with the spread of its peaks.
type RankTable struct {
	Rows      []RankRow  `json:"rows"`
	Allocated RankSpread `json:"allocated"`
	Reserved  RankSpread `json:"reserved"`
}

// Ranks sorts rows by rank (unknown ranks last, in the order given), then
// device, and finds the spread of the allocated and reserved peaks.
func Ranks(rows []RankRow) RankTable {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b RankRow) int {
		if (a.Rank == NoRank) != (b.Rank == NoRank) {
			if a.Rank == NoRank {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Device, b.Device))
	})
	if rows == nil {
		rows = []RankRow{}
	}
	t := RankTable{Rows: rows}
	t.Allocated = spread(rows, func(r *RankRow) Bytes { return r.PeakAllocated })
	t.Reserved = spread(rows, func(r *RankRow) Bytes { return r.PeakReserved })
	return t
}

// spread is the RankSpread of the value v of rows; the first row wins a
// tie, so the highest is the lowest rank among equals.
func spread(rows []RankRow, v func(*RankRow) Bytes) RankSpread {
	var s RankSpread
	if len(rows) == 0 {
		return s
	}
	vals := make([]Bytes, len(rows))
	for i := range rows {
		vals[i] = v(&rows[i])
		if vals[i] > vals[s.Highest] {
			s.Highest = i
		}
		if vals[i] < vals[s.Lowest] {
			s.Lowest = i
		}
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	n := len(sorted)
	s.MedianBytes = sorted[n/2]
	if n%2 == 0 {
		s.MedianBytes = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	s.HighestRank, s.HighestBytes = rows[s.Highest].Rank, vals[s.Highest]
	s.LowestRank, s.LowestBytes = rows[s.Lowest].Rank, vals[s.Lowest]
	s.AboveMedianBytes = s.HighestBytes - s.MedianBytes
	s.AboveLowestBytes = s.HighestBytes - s.LowestBytes
	if s.MedianBytes > 0 {
		s.AboveMedianRatio = float64(s.AboveMedianBytes) / float64(s.MedianBytes)
	}
	if s.LowestBytes > 0 {
		s.AboveLowestRatio = float64(s.AboveLowestBytes) / float64(s.LowestBytes)
	}
	return s
}

// WriteRanks writes t as a table, one line per rank, then the rank that
// peaks highest, for reserved and allocated bytes.
func WriteRanks(w io.Writer, t RankTable) error {
	tw := &textWriter{w: w}
	tw.f("%5s %6s %15s %15s %21s %5s  %s\n", "rank", "device", "allocated peak", "reserved peak", "external frag", "OOMs", "trace")
	unknown := false
	for _, r := range t.Rows {
		unknown = unknown || r.Rank == NoRank
		approx := ""
		if r.Approximate {
			approx = " (approximate)"
		}
		tw.f("%5s %6d %15s %15s %21s %5d  %s%s\n", rankLabel(r.Rank), r.Device, r.PeakAllocated, r.PeakReserved,
			fmt.Sprintf("%s %4.1f%%", r.ExternalFrag, 100*r.ExternalFragRatio), r.OOMs, filepath.Base(r.Trace), approx)
	}
	tw.spread(t, "reserved", t.Reserved)
	tw.spread(t, "allocated", t.Allocated)
	if unknown {
		tw.f("rank -: not known; name the snapshots rankN (or give tracer import --rank N)\n")
	}
	return tw.err
}

// spread writes the line that names the rank that peaks highest.
func (t *textWriter) spread(tab RankTable, what string, s RankSpread) {
	if len(tab.Rows) < 2 {
		return
	}
	if s.HighestBytes == s.LowestBytes {
		t.f("%s peak: every rank %s\n", what, s.HighestBytes)
		return
	}
	t.f("%s peak highest on %s: %s, %s above the median, %s above the lowest, %s\n", what,
		rowName(tab.Rows, s.Highest), s.HighestBytes, change(s.AboveMedianBytes, s.AboveMedianRatio),
		change(s.AboveLowestBytes, s.AboveLowestRatio), rowName(tab.Rows, s.Lowest))
}

// change formats a difference and its ratio to the base: "+12.0 MiB (+3.5%)".
func change(d Bytes, ratio float64) string {
	s := d.String()
	if d >= 0 {
		s = "+" + s
	}
	if ratio == 0 && d != 0 {
		return s
	}
	return fmt.Sprintf("%s (%+.1f%%)", s, 100*ratio)
}

func rankLabel(r int) string {
	if r == NoRank {
		return "-"
	}
	return strconv.Itoa(r)
}

// rowName names row i in a sentence: "rank 3", or its trace when the rank
// is unknown, with the trace or the device when another row has the same
// rank or trace.
func rowName(rows []RankRow, i int) string {
	r := rows[i]
	name := "rank " + strconv.Itoa(r.Rank)
	if r.Rank == NoRank {
		name = filepath.Base(r.Trace)
	}
	for j, o := range rows {
		if j == i || o.Rank != r.Rank {
			continue
		}
		if o.Trace == r.Trace {
			return fmt.Sprintf("%s device %d", name, r.Device)
		}
		if r.Rank != NoRank {
			return fmt.Sprintf("%s (%s)", name, filepath.Base(r.Trace))
		}
	}
	return name
}

// WriteRankChange writes, rank by rank, the peaks of the recorded run
// (rec) and of a replay of each rank under other settings (got, the same
// traces in the same order), then the rank that peaks highest in the
// replay.
func WriteRankChange(w io.Writer, rec, got RankTable) error {
	tw := &textWriter{w: w}
	if len(rec.Rows) != len(got.Rows) {
		return fmt.Errorf("analysis: %d recorded rows against %d replayed", len(rec.Rows), len(got.Rows))
	}
	tw.f("%5s %6s %15s %15s %22s %15s %7s  %s\n", "rank", "device", "reserved rec.", "reserved replay", "change", "alloc. replay", "OOMs", "trace")
	for i, g := range got.Rows {
		r := rec.Rows[i]
		ch := "="
		if d := g.PeakReserved - r.PeakReserved; d != 0 {
			ratio := 0.0
			if r.PeakReserved > 0 {
				ratio = float64(d) / float64(r.PeakReserved)
			}
			ch = change(d, ratio)
		}
		tw.f("%5s %6d %15s %15s %22s %15s %7s  %s\n", rankLabel(g.Rank), g.Device, r.PeakReserved, g.PeakReserved, ch,
			g.PeakAllocated, fmt.Sprintf("%d→%d", r.OOMs, g.OOMs), filepath.Base(g.Trace))
	}
	tw.spread(got, "replayed reserved", got.Reserved)
	return tw.err
}
