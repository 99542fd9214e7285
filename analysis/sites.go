package analysis

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/tracer-dev/tracer/trace"
)

// Site is an allocation site (a recorded stack) and what it held live.
type Site struct {
	Stack trace.StackID `json:"stack"`
	// Frames are the innermost frames of the stack (up to Options.SiteFrames),
	// innermost first; nil when no stack lookup was given.
	Frames []trace.Frame `json:"frames,omitempty"`
	// Caller is the innermost frame outside library code (site-packages,
	// dist-packages, the Python standard library): where the user's code
	// asked for the memory, often deeper than Frames reach. Zero if none.
	Caller         trace.Frame `json:"caller"`
	BlockBytes     Bytes       `json:"block_bytes"`     // Σ block sizes, as allocated_bytes counts them
	RequestedBytes Bytes       `json:"requested_bytes"` // Σ requested sizes
	Count          int64       `json:"count"`           // live blocks
}

// siteAgg is the live aggregate of one stack.
type siteAgg struct {
	block, req, count int64
	dirty             bool // changed since the last peak snapshot
}

// sites keeps per-stack aggregates of allocated blocks and a copy of them as
// they stood at the peak of allocated bytes.
//
// The copy is taken lazily: a new maximum of allocated bytes only marks the
// copy stale; the first decrease after it (or the end of the trace) takes
// it, since until then the state can only grow further. Taking it copies
// just the stacks changed since the previous copy (a dirty list), so the
// total work over a trace is bounded by the number of events, never by
// events × stacks, even when the peak creeps up every iteration.
type sites struct {
	cur, atPeak []siteAgg // indexed by siteIndex
	dirty       []int32
}

// maxStacks bounds the per-stack arrays. Stack tables are dense and far
// smaller; a larger id (a corrupt trace) is counted as NoStack rather than
// growing the arrays to gigabytes.
const maxStacks = 1 << 22

// siteIndex is where the aggregate of stack id lies: BeforeRecording at 0,
// NoStack (and any id out of range) at 1, the stacks after them.
func siteIndex(id trace.StackID) int {
	switch {
	case id == BeforeRecording:
		return 0
	case id < 0 || id >= maxStacks:
		return 1
	}
	return int(id) + 2
}

// siteStack is the stack whose aggregate lies at index i (siteIndex).
func siteStack(i int) trace.StackID {
	if i == 0 {
		return BeforeRecording
	}
	return trace.StackID(i - 2)
}

// add changes the aggregate of stack id; it is on the per-event path.
func (s *sites) add(id trace.StackID, block, req, count int64) {
	i := siteIndex(id)
	if i >= len(s.cur) {
		s.grow(i)
	}
	a := &s.cur[i]
	a.block += block
	a.req += req
	a.count += count
	if !a.dirty {
		a.dirty = true
		s.dirty = append(s.dirty, int32(i))
	}
}

func (s *sites) grow(i int) {
	n := max(2*len(s.cur), i+1, 64)
	s.cur = append(s.cur, make([]siteAgg, n-len(s.cur))...)
	s.atPeak = append(s.atPeak, make([]siteAgg, n-len(s.atPeak))...)
}

// snapshot makes atPeak equal cur, copying only the dirty entries.
func (s *sites) snapshot() {
	for _, i := range s.dirty {
		s.cur[i].dirty = false
		s.atPeak[i] = s.cur[i]
	}
	s.dirty = s.dirty[:0]
}

// top returns the n largest sites at the peak by block bytes (ties by stack
// id, for determinism), and the remainder folded into one Site with Stack
// OtherSites (zero bytes when nothing was left out).
func (s *sites) top(n int, lookup func(trace.StackID) trace.Stack, frames int) (top []Site, other Site) {
	return s.topOf(s.atPeak, n, lookup, frames)
}

// topOf is top over aggs: the sites at the peak (atPeak) or now (cur).
func (s *sites) topOf(aggs []siteAgg, n int, lookup func(trace.StackID) trace.Stack, frames int) (top []Site, other Site) {
	var all []Site
	for i, a := range aggs {
		if a.count == 0 && a.block == 0 {
			continue
		}
		all = append(all, Site{Stack: siteStack(i), BlockBytes: Bytes(a.block),
			RequestedBytes: Bytes(a.req), Count: a.count})
	}
	slices.SortFunc(all, func(a, b Site) int {
		if c := cmp.Compare(b.BlockBytes, a.BlockBytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Stack, b.Stack)
	})
	other.Stack = OtherSites
	if n > 0 && len(all) > n {
		for _, x := range all[n:] {
			other.BlockBytes += x.BlockBytes
			other.RequestedBytes += x.RequestedBytes
			other.Count += x.Count
		}
		all = all[:n]
	}
	if lookup != nil {
		for i := range all {
			if all[i].Stack < 0 {
				continue
			}
			st := lookup(all[i].Stack)
			all[i].Caller = userFrame(st)
			if len(st) > frames {
				st = st[:frames]
			}
			all[i].Frames = slices.Clone(st)
		}
	}
	return all, other
}

// Stacks of the sites that are not a recorded stack. A Site's Stack is a
// trace.StackID, trace.NoStack (blocks allocated without a stack), or one of
// these.
const (
	// OtherSites is the Stack of the Site that sums every site beyond the
	// top N.
	OtherSites trace.StackID = -2
	// BeforeRecording is the Stack of the site of the blocks a trace's
	// history starts with: live before the recording began (a wrapped
	// history, rebuilt by tracer import), so their stacks are lost.
	BeforeRecording trace.StackID = -3
)

// userFrame returns the innermost frame of st outside library code, or the
// zero Frame.
func userFrame(st trace.Stack) trace.Frame {
	for _, f := range st {
		file := strings.ReplaceAll(f.File, "\\", "/")
		if f.File == "" || strings.HasPrefix(file, "<") ||
			strings.Contains(file, "site-packages/") || strings.Contains(file, "dist-packages/") ||
			strings.Contains(file, "/lib/python") {
			continue
		}
		return f
	}
	return trace.Frame{}
}

// Label names a site in one line: its caller, then the innermost frame when
// that differs ("train.py:161 step via linear.py:134 forward").
func (s *Site) Label() string {
	switch {
	case s.Stack == trace.NoStack:
		return "(no stack)"
	case s.Stack == OtherSites:
		return "(other sites)"
	case s.Stack == BeforeRecording:
		return "(live before the recording began)"
	case len(s.Frames) == 0 && s.Caller == (trace.Frame{}):
		return "stack " + strconv.Itoa(int(s.Stack))
	case s.Caller == (trace.Frame{}):
		return ShortFrame(s.Frames[0])
	case len(s.Frames) == 0 || s.Frames[0] == s.Caller:
		return ShortFrame(s.Caller)
	}
	return ShortFrame(s.Caller) + " via " + ShortFrame(s.Frames[0])
}

// SiteLabel names the site of stack id, whose frames are st (nil when
// unknown), as Site.Label does.
func SiteLabel(id trace.StackID, st trace.Stack) string {
	s := Site{Stack: id, Caller: userFrame(st)}
	if len(st) > 0 {
		s.Frames = st[:1]
	}
	return s.Label()
}
