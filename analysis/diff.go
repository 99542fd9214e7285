package analysis

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/tracer-dev/tracer/trace"
)

// DiffKeys are the memory_stats() keys a Diff compares, peaks first, then
// counters. A key neither summary has is left out.
var DiffKeys = []string{
	"allocated_bytes.all.peak", "reserved_bytes.all.peak", "active_bytes.all.peak",
	"requested_bytes.all.peak", "inactive_split_bytes.all.peak",
	"allocated_bytes.all.current", "reserved_bytes.all.current",
	"segment.all.peak", "allocation.all.peak", "allocation.all.allocated",
	"num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms",
}

// Diff compares two runs (two traces, or one device of each): their
// memory_stats() peaks and counters, their fragmentation, and what each
// allocation site held live at the allocated peak. It is how a regression
// is found: a new PyTorch version or a code change that makes a run peak
// higher shows which sites grew.
type Diff struct {
	DeviceA int32        `json:"device_a"`
	DeviceB int32        `json:"device_b"`
	Stats   []StatChange `json:"stats"`
	// FragmentationA and FragmentationB are the two runs' measures.
	FragmentationA Fragmentation `json:"fragmentation_a"`
	FragmentationB Fragmentation `json:"fragmentation_b"`
	// Sites are the sites whose live bytes at the allocated peak differ,
	// largest change (grown or shrunk) first, at most the top asked for;
	// Rest sums the changes of the others, and Unchanged counts the sites
	// that held as much in both.
	Sites     []SiteChange `json:"sites"`
	Rest      SiteChange   `json:"rest"`
	RestSites int          `json:"rest_sites"`
	Unchanged int          `json:"unchanged_sites"`
	// Approximate: a run's block sizes are partly unknown (Summary.Approximate).
	ApproximateA bool `json:"approximate_a"`
	ApproximateB bool `json:"approximate_b"`
}

// StatChange is one memory_stats() key in both runs.
type StatChange struct {
	Key    string `json:"key"`
	A      int64  `json:"a"`
	B      int64  `json:"b"`
	Change int64  `json:"change"` // B − A
}

// SiteChange is what one allocation site held live at each run's
// allocated peak. Sites of two traces are matched by their frames (stack
// ids differ between traces), so a site whose line moved in a code change
// shows as one that shrank and one that grew.
type SiteChange struct {
	Site string `json:"site"` // Site.Label
	// Frames are the site's innermost frames, innermost first, as
	// "file:line function".
	Frames      []string `json:"frames"`
	ABytes      Bytes    `json:"a_bytes"`
	BBytes      Bytes    `json:"b_bytes"`
	ChangeBytes Bytes    `json:"change_bytes"` // BBytes − ABytes
	ACount      int64    `json:"a_blocks"`
	BCount      int64    `json:"b_blocks"`
}

// Compare diffs a against b. Their Sites should be complete (analysed
// with Options.TopSites < 0), or the sites beyond each one's top fall into
// Rest; top bounds Diff.Sites (all when ≤ 0).
func Compare(a, b *Summary, top int) *Diff {
	d := &Diff{DeviceA: a.Device, DeviceB: b.Device, FragmentationA: a.Fragmentation, FragmentationB: b.Fragmentation,
		ApproximateA: a.Approximate, ApproximateB: b.Approximate, Stats: []StatChange{}, Sites: []SiteChange{}}
	for _, k := range DiffKeys {
		va, okA := a.Stats[k]
		vb, okB := b.Stats[k]
		if okA || okB {
			d.Stats = append(d.Stats, StatChange{Key: k, A: va, B: vb, Change: vb - va})
		}
	}
	bySite := map[string]*SiteChange{}
	var order []string
	add := func(s Site, inB bool) {
		k := siteKey(&s)
		c := bySite[k]
		if c == nil {
			c = &SiteChange{Site: s.Label(), Frames: []string{}}
			for _, f := range s.Frames {
				c.Frames = append(c.Frames, fmt.Sprintf("%s:%d %s", f.File, f.Line, f.Name))
			}
			bySite[k] = c
			order = append(order, k)
		}
		if inB {
			c.BBytes += s.BlockBytes
			c.BCount += s.Count
		} else {
			c.ABytes += s.BlockBytes
			c.ACount += s.Count
		}
	}
	for _, s := range a.Sites {
		add(s, false)
	}
	if a.Other.Count > 0 {
		add(a.Other, false)
	}
	for _, s := range b.Sites {
		add(s, true)
	}
	if b.Other.Count > 0 {
		add(b.Other, true)
	}
	var changed []SiteChange
	for _, k := range order {
		c := bySite[k]
		c.ChangeBytes = c.BBytes - c.ABytes
		if c.ChangeBytes == 0 && c.ACount == c.BCount {
			d.Unchanged++
			continue
		}
		changed = append(changed, *c)
	}
	slices.SortStableFunc(changed, func(x, y SiteChange) int {
		return cmp.Or(cmp.Compare(abs(y.ChangeBytes), abs(x.ChangeBytes)), cmp.Compare(x.Site, y.Site))
	})
	d.Rest = SiteChange{Site: "(other sites)", Frames: []string{}}
	if top > 0 && len(changed) > top {
		for _, c := range changed[top:] {
			d.Rest.ABytes += c.ABytes
			d.Rest.BBytes += c.BBytes
			d.Rest.ACount += c.ACount
			d.Rest.BCount += c.BCount
		}
		d.Rest.ChangeBytes = d.Rest.BBytes - d.Rest.ABytes
		d.RestSites = len(changed) - top
		changed = changed[:top]
	}
	if changed != nil {
		d.Sites = changed
	}
	return d
}

// noStackLabel is the Label of the site of the blocks without a stack,
// made at first use rather than at package init.
var noStackLabel = sync.OnceValue(func() string { return (&Site{Stack: trace.NoStack}).Label() })

// siteKey identifies a site across traces: its label and its frames.
func siteKey(s *Site) string {
	var b strings.Builder
	b.WriteString(s.Label())
	for _, f := range s.Frames {
		fmt.Fprintf(&b, "\x00%s:%d:%s", f.File, f.Line, f.Name)
	}
	return b.String()
}

func abs(b Bytes) Bytes {
	if b < 0 {
		return -b
	}
	return b
}

// diffRows are the stats the text shows, with their labels; the others
// are in the JSON.
var diffRows = []struct{ key, label string }{
	{"allocated_bytes.all.peak", "allocated peak"},
	{"reserved_bytes.all.peak", "reserved peak"},
	{"active_bytes.all.peak", "active peak"},
	{"requested_bytes.all.peak", "requested peak"},
	{"inactive_split_bytes.all.peak", "inactive split peak"},
	{"segment.all.peak", "segments peak"},
	{"allocation.all.allocated", "allocations"},
	{"num_device_alloc", "device mallocs"},
	{"num_device_free", "device frees"},
	{"num_alloc_retries", "alloc retries"},
	{"num_ooms", "OOMs"},
}

// WriteDiff writes d side by side, A (named nameA) then B, with the
// change from A to B.
func WriteDiff(w io.Writer, d *Diff, nameA, nameB string) error {
	t := &textWriter{w: w}
	t.f("A: %s, device %d\nB: %s, device %d\n\n", nameA, d.DeviceA, nameB, d.DeviceB)
	t.f("%-26s %14s %14s %22s\n", "", "A", "B", "change")
	stat := map[string]StatChange{}
	for _, s := range d.Stats {
		stat[s.Key] = s
	}
	for _, r := range diffRows {
		s, ok := stat[r.key]
		if !ok {
			continue
		}
		if strings.Contains(r.key, "_bytes") {
			t.f("%-26s %14s %14s %22s\n", r.label, Bytes(s.A), Bytes(s.B), bytesChange(s.A, s.B))
		} else {
			t.f("%-26s %14d %14d %22s\n", r.label, s.A, s.B, countChange(s.A, s.B))
		}
	}
	fa, fb := d.FragmentationA, d.FragmentationB
	t.f("%-26s %14s %14s %22s\n", "external frag at peak", fa.ExternalAtReservedPeak, fb.ExternalAtReservedPeak,
		bytesChange(int64(fa.ExternalAtReservedPeak), int64(fb.ExternalAtReservedPeak)))
	t.f("%-26s %13.1f%% %13.1f%% %22s\n", "1 − active/reserved peak", 100*fa.GMLake, 100*fb.GMLake, fmt.Sprintf("%+.1f pt", 100*(fb.GMLake-fa.GMLake)))
	t.f("%-26s %14s %14s %22s\n", "internal frag at peak", fa.InternalAtPeak, fb.InternalAtPeak,
		bytesChange(int64(fa.InternalAtPeak), int64(fb.InternalAtPeak)))
	if d.ApproximateA || d.ApproximateB {
		t.f("approximate: a trace lacks some block sizes (see tracer info); its block figures are lower bounds\n")
	}
	t.f("\nlive at the allocated peak, by site: ")
	if len(d.Sites) == 0 {
		t.f("no site changed (%s)\n", plural(d.Unchanged, "site"))
		return t.err
	}
	t.f("%d changed, largest change first", len(d.Sites)+d.RestSites)
	if d.Unchanged > 0 {
		t.f("; %d unchanged", d.Unchanged)
	}
	t.f("\n%12s %12s %12s  %s\n", "A", "B", "change", "site")
	for _, c := range d.Sites {
		t.f("%12s %12s %12s  %s\n", c.ABytes, c.BBytes, signed(c.ChangeBytes), c.Site)
	}
	if d.RestSites > 0 {
		t.f("%12s %12s %12s  (%d other sites)\n", d.Rest.ABytes, d.Rest.BBytes, signed(d.Rest.ChangeBytes), d.RestSites)
	}
	if d.Unchanged == 0 && d.RestSites == 0 && len(d.Sites) == 1 && d.Sites[0].Site == noStackLabel() {
		t.f("(the runs were recorded without stacks, so there are no sites to compare: record with\n" +
			" torch.cuda.memory._record_memory_history(context=\"all\", stacks=\"python\"))\n")
	}
	return t.err
}

func signed(b Bytes) string {
	if b > 0 {
		return "+" + b.String()
	}
	return b.String()
}

// bytesChange formats b − a with its ratio to a: "+1.0 MiB (+5.0%)", or
// "=". A ratio over 10× says little (a few bytes of rounding against many
// MiB) and is left out.
func bytesChange(a, b int64) string {
	if a == b {
		return "="
	}
	r := float64(b-a) / float64(a)
	if a == 0 || r > 10 {
		return signed(Bytes(b - a))
	}
	return fmt.Sprintf("%s (%+.1f%%)", signed(Bytes(b-a)), 100*r)
}

func countChange(a, b int64) string {
	if a == b {
		return "="
	}
	return fmt.Sprintf("%+d", b-a)
}

// PairDevices pairs the devices of two runs for Compare: the one device
// of each when each has one (the ranks of a distributed run use one
// device each, a different one), else the devices of the same ordinal.
// Unpaired are the ones with no counterpart, as "A device 1".
func PairDevices(a, b []*Summary) (pairs [][2]*Summary, unpaired []string) {
	if len(a) == 1 && len(b) == 1 {
		return [][2]*Summary{{a[0], b[0]}}, []string{}
	}
	unpaired = []string{}
	inB := map[int32]*Summary{}
	for _, s := range b {
		inB[s.Device] = s
	}
	for _, s := range a {
		if o := inB[s.Device]; o != nil {
			pairs = append(pairs, [2]*Summary{s, o})
			delete(inB, s.Device)
		} else {
			unpaired = append(unpaired, fmt.Sprintf("A device %d", s.Device))
		}
	}
	for _, s := range b {
		if inB[s.Device] != nil {
			unpaired = append(unpaired, fmt.Sprintf("B device %d", s.Device))
		}
	}
	return pairs, unpaired
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
