package analysis

import (
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/tracer-dev/tracer/trace"
)

// WriteText writes sum as a report that fits an 80-column terminal, every
// number with its unit, listing at most topN allocation sites (all of
// sum.Sites when topN ≤ 0).
func WriteText(w io.Writer, sum *Summary, topN int) error {
	return WriteTextOptions(w, sum, TextOptions{Top: topN})
}

// TextOptions shape WriteTextOptions' report.
type TextOptions struct {
	Top int // allocation sites to list; all when ≤ 0
	// FullStacks lists every frame of each site's stack (as many as
	// Options.SiteFrames kept), with whole file paths, instead of the
	// innermost few on one clipped line.
	FullStacks bool
}

// WriteTextOptions is WriteText with options.
func WriteTextOptions(w io.Writer, sum *Summary, opt TextOptions) error {
	tw := &textWriter{w: w, full: opt.FullStacks}
	tw.header(sum)
	tw.peaks(sum)
	tw.fragmentation(sum)
	tw.counters(sum)
	tw.sites(sum, opt.Top)
	tw.phases(sum)
	tw.lifetimes(sum)
	tw.segments(sum)
	tw.ooms(sum)
	return tw.err
}

type textWriter struct {
	w    io.Writer
	err  error
	full bool // whole stacks (TextOptions.FullStacks)
}

func (t *textWriter) f(format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format, args...)
	}
}

func (t *textWriter) header(sum *Summary) {
	t.f("device %d: %s events", sum.Device, Count(sum.Events))
	if sum.SkippedEvents > 0 {
		t.f(" (%d of other devices skipped)", sum.SkippedEvents)
	}
	if sum.Timeline.HasTime && len(sum.Timeline.Buckets) > 0 {
		last := sum.Timeline.Buckets[len(sum.Timeline.Buckets)-1]
		t.f(" over %s", Duration(last.LastTimeUs-sum.Timeline.T0Us))
	}
	t.f("\n")
	if sum.Approximate {
		t.f("approximate: the trace lacks block sizes; requests rounded up to 512 B\n")
	}
	if sum.Unmatched > 0 {
		t.f("warning: %d events did not match the state (truncated trace?)\n", sum.Unmatched)
	}
}

// when formats the moment of a peak: time since the start, else event index.
func when(sum *Summary, p Peak) string {
	if sum.Timeline.HasTime && p.TimeUs != 0 {
		return "at " + Duration(p.TimeUs-sum.Timeline.T0Us)
	}
	return "at event " + strconv.FormatInt(p.Seq, 10)
}

func (t *textWriter) peaks(sum *Summary) {
	t.f("\n%-10s %12s %12s  %s\n", "memory", "end", "peak", "peak reached")
	for _, r := range []struct {
		name string
		key  string
		p    Peak
	}{
		{"allocated", "allocated_bytes", sum.Peaks.Allocated},
		{"reserved", "reserved_bytes", sum.Peaks.Reserved},
		{"active", "active_bytes", sum.Peaks.Active},
		{"requested", "requested_bytes", sum.Peaks.Requested},
	} {
		t.f("%-10s %12s %12s  %s\n", r.name, Bytes(sum.Stats[r.key+".all.current"]), r.p.Bytes, when(sum, r.p))
	}
}

func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) + "%" }

func (t *textWriter) fragmentation(sum *Summary) {
	f := sum.Fragmentation
	res := sum.Peaks.Reserved.Bytes
	t.f("\nfragmentation\n")
	t.f("  internal at allocated peak (active-requested) %11s\n", f.InternalAtPeak)
	t.f("  external at reserved peak (unused reserve)    %11s  %s of reserved\n",
		f.ExternalAtReservedPeak, pct(f.ExternalRatio))
	t.f("  max external (reserved-allocated)             %11s  %s\n", f.ExternalMax.Bytes, when(sum, f.ExternalMax))
	t.f("  max inactive split (free beside live blocks)  %11s  %s\n", f.InactiveSplitMax.Bytes, when(sum, f.InactiveSplitMax))
	if res > 0 {
		t.f("  GMLake: 1 - peak active / peak reserved       %11s\n", pct(f.GMLake))
	}
	if g := sum.Grow; g != nil {
		t.f("  largest request that grew the pool            %11s  %s\n", g.BlockSize, when(sum, Peak{Seq: g.Seq, TimeUs: g.TimeUs}))
		t.f("    largest free block then %s (%s on its stream)\n", g.LargestFree, g.LargestFreeStream)
	}
}

func (t *textWriter) counters(sum *Summary) {
	s := sum.Stats
	t.f("\nsegments %s (peak %s), device allocs %s, device frees %s\n",
		Count(s["segment.all.current"]), Count(s["segment.all.peak"]), Count(s["num_device_alloc"]), Count(s["num_device_free"]))
	t.f("allocations %s (peak %s live), ooms %s\n",
		Count(s["allocation.all.allocated"]), Count(s["allocation.all.peak"]), Count(s["num_ooms"]))
}

func (t *textWriter) sites(sum *Summary, topN int) {
	sites := sum.Sites
	if topN > 0 && len(sites) > topN {
		sites = sites[:topN]
	}
	if len(sites) == 0 {
		return
	}
	t.f("\nlive at the allocated peak (%s %s), by site\n", sum.Peaks.Allocated.Bytes, when(sum, sum.Peaks.Allocated))
	t.f("%10s %10s %7s  %s\n", "block", "requested", "blocks", "site: caller, via innermost frames")
	const indent = 31 // the width of the numbers before a site
	noStack, cut := false, false
	fit := func(s string) string {
		c := clip(s, 80-indent-2)
		cut = cut || c != s
		return c
	}
	for _, x := range sites {
		t.f("%10s %10s %7d  ", x.BlockBytes, x.RequestedBytes, x.Count)
		noStack = noStack || x.Stack == trace.NoStack
		if t.full && len(x.Frames) > 0 {
			t.f("%s\n", x.Label())
			for _, fr := range x.Frames {
				t.f("%*s%s\n", indent+2, "", longFrame(fr))
			}
			continue
		}
		if x.Caller == (trace.Frame{}) || len(x.Frames) == 0 || x.Frames[0] == x.Caller {
			t.f("%s\n", fit(x.Label()))
			continue
		}
		// The caller, then the innermost frames that led from it.
		t.f("%s\n", fit(ShortFrame(x.Caller)))
		var via []string
		for _, fr := range x.Frames {
			if fr == x.Caller {
				break
			}
			via = append(via, ShortFrame(fr))
		}
		t.f("%*s%s\n", indent+2, "", fit("via "+strings.Join(via, " < ")))
	}
	var rest Site
	for _, x := range sum.Sites[len(sites):] {
		rest.BlockBytes += x.BlockBytes
		rest.RequestedBytes += x.RequestedBytes
		rest.Count += x.Count
	}
	rest.BlockBytes += sum.Other.BlockBytes
	rest.RequestedBytes += sum.Other.RequestedBytes
	rest.Count += sum.Other.Count
	if rest.Count > 0 {
		t.f("%10s %10s %7d  (other sites)\n", rest.BlockBytes, rest.RequestedBytes, rest.Count)
	}
	if noStack {
		t.f("%s", wrap("(no stack): "+NoStackHint, 80, "  "))
	}
	if cut {
		t.f("(… cut to fit: tracer analyze --full-stacks shows whole stacks)\n")
	}
}

// longFrame formats a frame with its whole file path: "path/file.py:12 name".
func longFrame(f trace.Frame) string {
	if f.Line < 0 {
		return fmt.Sprintf("%s:? %s", f.File, f.Name)
	}
	return fmt.Sprintf("%s:%d %s", f.File, f.Line, f.Name)
}

// wrap breaks s into lines of at most width runes at spaces, continuation
// lines indented.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		n := len([]rune(word))
		if i > 0 && line+1+n > width {
			b.WriteString("\n" + indent)
			line = len(indent)
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += n
	}
	b.WriteByte('\n')
	return b.String()
}

// phases writes what each record_function scope did (Summary.Phases).
func (t *textWriter) phases(sum *Summary) {
	if len(sum.Phases) == 0 {
		return
	}
	t.f("\nphases: the innermost record_function scope at each event\n")
	t.f("%-25s %5s %9s %11s %12s %12s\n", "phase", "runs", "time", "peak alloc", "allocated in", "live at peak")
	for _, p := range sum.Phases {
		runs := strconv.FormatInt(p.Runs, 10)
		if p.Name == OutsidePhases || p.Name == BeforeRecordingPhase {
			runs = "-"
		}
		t.f("%-25s %5s %9s %11s %12s %12s\n", clip(p.Name, 25), runs, Duration(p.TimeUs),
			p.PeakAllocatedBytes, p.AllocatedBytes, p.LiveAtPeakBytes)
	}
	t.f("allocated peak in %s, reserved peak in %s\n", sum.AllocatedPeakPhase, sum.ReservedPeakPhase)
}

func (t *textWriter) lifetimes(sum *Summary) {
	l := sum.Lifetimes
	if l.Count == 0 {
		return
	}
	d := func(v int64) string {
		if l.Unit == "us" {
			return Duration(v)
		}
		return strconv.FormatInt(v, 10) + " ev"
	}
	t.f("\nlifetimes (alloc to free_requested) of %s blocks\n", Count(l.Count))
	t.f("  p50 %s, p90 %s, p99 %s, max %s\n", d(l.P50), d(l.P90), d(l.P99), d(l.Max))
	var lo int64
	for _, b := range l.Buckets {
		if b.Count > 0 {
			rng := "≥ " + d(lo)
			if b.Below > 0 {
				rng = "< " + d(b.Below)
			}
			t.f("  %-12s %10d blocks %12s\n", rng, b.Count, b.Bytes)
		}
		lo = b.Below
	}
	if l.LiveAtEnd > 0 {
		t.f("  live at the end: %d blocks, %s\n", l.LiveAtEnd, l.LiveAtEndBytes)
	}
}

func (t *textWriter) segments(sum *Summary) {
	if len(sum.Segments) == 0 {
		return
	}
	var a, p, split, free Bytes
	var exp int
	for _, g := range sum.Segments {
		a, p, split, free = a+g.Allocated, p+g.PendingFree, split+g.SplitFree, free+g.Free
		if g.Expandable {
			exp++
		}
	}
	t.f("\nsegments when the reserved peak was fullest (%s): %d", when(sum, sum.SegmentsAt), len(sum.Segments))
	if exp > 0 {
		t.f(" (%d expandable)", exp)
	}
	t.f("\n  allocated %s, pending free %s\n", a, p)
	t.f("  free beside live blocks %s, free in empty segments %s\n", split, free)
}

func (t *textWriter) ooms(sum *Summary) {
	n := sum.Stats["num_ooms"]
	if n == 0 {
		return
	}
	t.f("\nout of memory errors: %d\n", n)
	for _, o := range sum.OOMs {
		room := "device free " + o.DeviceFree.String()
		if sum.MemoryLimit > 0 {
			room = fmt.Sprintf("%s free under the %s memory limit", max(sum.MemoryLimit-o.Reserved, 0), sum.MemoryLimit)
		}
		t.f("  %s: request %s on stream %#x; %s\n", when(sum, Peak{Seq: o.Seq, TimeUs: o.TimeUs}), o.Request, o.Stream, room)
		t.f("    cache free %s, largest free block %s (%s on its stream)\n", o.CacheFree, o.LargestFree, o.LargestFreeStream)
		t.oomVerdict(&o)
	}
}

// oomVerdict writes why an OOM happened, who was live, and what avoids it.
func (t *textWriter) oomVerdict(o *OOM) {
	switch o.Cause {
	case CauseLimit:
		t.f("    cause: the limit: %s live + %s asked > %s allowed\n", o.LiveBytes, o.Request, o.CapacityBytes)
	case CauseFragmentation:
		t.f("    cause: fragmentation: %s live + %s asked fit in %s,\n", o.LiveBytes, o.Request, o.CapacityBytes)
		t.f("      but no free block is large enough (%s free beside live blocks)\n", o.FreeBesideLiveBytes)
	}
	if len(o.LiveSites) > 0 {
		t.f("    live then:\n")
	}
	for _, st := range o.LiveSites {
		t.f("      %10s %6d blocks  %s\n", st.BlockBytes, st.Count, clip(st.Label(), 50))
	}
	if len(o.AvoidedBy) > 0 {
		t.f("    avoided by:\n")
		for _, a := range o.AvoidedBy {
			if a == "" {
				a = "(PyTorch's defaults)"
			}
			t.f("      PYTORCH_CUDA_ALLOC_CONF=%s\n", a)
		}
	}
}

// Count formats a count with thousands separators, "3,321,008", so long
// counts read at a glance in reports.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Duration formats microseconds with a unit chosen by magnitude and up to
// two decimals: "172 µs", "2.8 ms", "10 s".
func Duration(us int64) string {
	switch {
	case us < 1000 && us > -1000:
		return strconv.FormatInt(us, 10) + " µs"
	case us < 1e6 && us > -1e6:
		return trimZeros(float64(us)/1e3) + " ms"
	default:
		return trimZeros(float64(us)/1e6) + " s"
	}
}

func trimZeros(x float64) string {
	s := strconv.FormatFloat(x, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// ShortFrame formats a frame as "file:line name" with only the file's base
// name, for reports and plot legends.
func ShortFrame(f trace.Frame) string {
	file := path.Base(strings.ReplaceAll(f.File, "\\", "/"))
	if f.File == "" {
		file = "?"
	}
	if f.Line < 0 {
		return fmt.Sprintf("%s:? %s", file, f.Name)
	}
	return fmt.Sprintf("%s:%d %s", file, f.Line, f.Name)
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
