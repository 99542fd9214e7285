package torchsnap

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tracer-dev/tracer/internal/addrmap"
	"github.com/tracer-dev/tracer/trace"
)

// Problem is one kind of contradiction found in a device's history, counted.
// Problems are warnings: PyTorch copies the trace and walks the segments at
// slightly different moments, so small inconsistencies at the tail are normal.
type Problem struct {
	Device   int32
	Kind     string // what was wrong, e.g. "free of an address that is not allocated"
	Count    int
	Examples []ProblemAt // the first few occurrences
}

// ProblemAt locates one occurrence: Event is the index into Device.Events,
// or -1 for the final state.
type ProblemAt struct {
	Event int
	Addr  uint64
}

// maxExamples is how many occurrences a Problem keeps.
const maxExamples = 3

func (p Problem) String() string {
	if p.Count == 0 {
		return fmt.Sprintf("device %d: %s", p.Device, p.Kind) // not counted: a statement about the trace
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "device %d: %d × %s (", p.Device, p.Count, p.Kind)
	for i, x := range p.Examples {
		if i > 0 {
			sb.WriteString(", ")
		}
		if x.Event >= 0 {
			fmt.Fprintf(&sb, "event %d ", x.Event)
		} else {
			sb.WriteString("final state ")
		}
		fmt.Fprintf(&sb, "at %#x", x.Addr)
	}
	if p.Count > len(p.Examples) {
		sb.WriteString(", …")
	}
	sb.WriteString(")")
	return sb.String()
}

// Validate replays d's events from the state Reconstruct infers at their
// start, on a map of live blocks and segment ranges (not an allocator model),
// and counts contradictions: frees of addresses that are not allocated, two
// live blocks at one address, allocations outside every segment, unpaired
// segment events, and a final state that differs from d.Segments. Problems
// come back in a stable order; an empty result means the history is
// consistent. It reuses the start state that Reconstruct derived, so the two
// must not run at the same time on one Device.
func (d *Device) Validate() []Problem { return d.ValidateReserved(0) }

// ValidateReserved is Validate told that at most more blocks than at the
// trace's start are live at once (a scan of the events counts them; 0 if
// unknown): its table of live blocks is made that large at once rather
// than grown by doubling, which rehashes every block and keeps two tables
// while it does.
func (d *Device) ValidateReserved(more int64) []Problem { return d.ValidateParts(more, 1, nil) }

// events validates evs, the events from index i0 on: the block events of
// v's part of the addresses (partOf), and every segment event.
func (v *validator) events(evs []trace.Event, i0 int) {
	live, fw, perSeg := &v.live, v.fw, &v.perSeg
	peekAt := 0
	for k := range evs {
		if k >= peekAt {
			peekAt = min(k+validatePeek, len(evs))
			for j := k; j < peekAt; j++ {
				if v.mine(&evs[j]) {
					v.peeked += live.Peek(evs[j].Addr)
				}
			}
		}
		e := &evs[k]
		i := i0 + k
		switch e.Kind {
		case trace.KindAlloc:
			if !v.mine(e) {
				break
			}
			r := live.Ref(e.Addr)
			if r != nil {
				v.add("alloc at an address that is already allocated", i, e.Addr)
			}
			g, ok := fw.segs.find(e.Addr)
			if !ok {
				v.add("alloc outside every segment", i, e.Addr)
			}
			if r != nil {
				v.untrack(r)
			}
			var rec liveRec // not pending
			if ok {
				rec.seg = perSeg.add(g.addr)
			}
			if r != nil {
				*r = rec
			} else {
				live.Put(e.Addr, rec)
			}
		case trace.KindFreeRequested:
			if !v.mine(e) {
				break
			}
			r := live.Ref(e.Addr)
			switch {
			case r == nil:
				v.add("free of an address that is not allocated", i, e.Addr)
				live.Put(e.Addr, liveRec{pending: true})
			case r.pending:
				v.add("free_requested twice", i, e.Addr)
			default:
				r.pending = true
			}
		case trace.KindFreeCompleted:
			if !v.mine(e) {
				break
			}
			k := live.Find(e.Addr) // one probe for the lookup and the delete
			switch {
			case k < 0:
				v.add("free of an address that is not allocated", i, e.Addr)
			case !live.At(k).pending:
				v.add("free_completed without free_requested", i, e.Addr)
			}
			if k >= 0 {
				v.untrack(live.At(k))
				live.DeleteAt(e.Addr, k)
			}
		case trace.KindSegmentAlloc:
			if g, ok := fw.segs.find(e.Addr); ok || (g != nil && g.addr < e.Addr+uint64(e.Size)) {
				v.addSeg("segment_alloc over an existing segment", i, e.Addr)
			}
			fw.segs.insert(&segRange{addr: e.Addr, size: e.Size, stream: e.Stream})
		case trace.KindSegmentFree:
			g, ok := fw.segs.find(e.Addr)
			if !ok || g.addr != e.Addr {
				v.addSeg("segment_free of an unknown segment", i, e.Addr)
				break
			}
			if perSeg.live(e.Addr) > 0 {
				// Each part counts its own blocks: the parts' occurrences are joined (mergeParts) as segLiveKind.
				v.segLive = append(v.segLive, ProblemAt{Event: i, Addr: e.Addr})
			}
			fw.segs.removeStart(e.Addr)
		case trace.KindSegmentMap:
			if _, ok := fw.segs.find(e.Addr); ok {
				v.addSeg("segment_map of mapped memory", i, e.Addr)
			}
			fw.unmap(e) // undoing an unmap is mapping
		case trace.KindSegmentUnmap:
			if _, ok := fw.segs.find(e.Addr); !ok {
				v.addSeg("segment_unmap of unmapped memory", i, e.Addr)
			}
			fw.segs.cut(e.Addr, e.Size)
		}
	}
}

// final checks that the state after the trace is the dumped one, and
// returns the problems found. after walks the blocks live after the trace
// by address; inOrder says the final state's live blocks are in address
// order as d.Segments lists them (liveInOrder), as dumped.
func (v *validator) final(d *Device, after *afterMerge, inOrder bool) []Problem {
	missing := v.finalAgainst(after, func(fn func(addrPending)) { finalLive(d, inOrder, fn) })
	for _, a := range missing {
		v.add(missingKind, -1, a)
	}
	return v.skipped()
}

// finalAgainst walks the final state's live blocks (walk, in address
// order) and after side by side: the problems of after's blocks in its
// order, then returns the final state's blocks missing from after, in
// theirs, the problems of missingKind that follow the others.
func (v *validator) finalAgainst(after *afterMerge, walk func(fn func(addrPending))) (missing []uint64) {
	walk(func(w addrPending) {
		for ; after.more() && after.peek().addr < w.addr; after.next() {
			v.add("block live after the trace but not in the final state", -1, after.peek().addr)
		}
		switch {
		case !after.more() || after.peek().addr != w.addr:
			missing = append(missing, w.addr)
		default:
			if after.peek().pending != w.pending {
				v.add("block pending state differs from the final state", -1, w.addr)
			}
			after.next()
		}
	})
	for ; after.more(); after.next() {
		v.add("block live after the trace but not in the final state", -1, after.peek().addr)
	}
	return missing
}

// missingKind is the problem of a block of the final state that the trace
// does not leave live.
const missingKind = "block in the final state but not live after the trace"

// liveInOrder reports whether the final state's live blocks are in address
// order (equal addresses next to each other) as d.Segments lists them.
func liveInOrder(d *Device) bool {
	last := uint64(0)
	for _, s := range d.Segments {
		for i := range s.Blocks {
			if b := &s.Blocks[i]; b.State.Live() {
				if b.Addr < last {
					return false
				}
				last = b.Addr
			}
		}
	}
	return true
}

// finalLive calls fn on each of the final state's live blocks in address
// order; of two at one address, on the later only. Where they are in
// order (inOrder, as dumped) it walks the segments, with nothing made or
// sorted: for millions of blocks the sorted copy was the longest step of
// the validation after its parts.
func finalLive(d *Device, inOrder bool, fn func(addrPending)) {
	if !inOrder {
		var want []addrPending
		for _, s := range d.Segments {
			for _, b := range s.Blocks {
				if b.State.Live() {
					want = append(want, addrPending{b.Addr, b.State == ActivePendingFree})
				}
			}
		}
		slices.SortStableFunc(want, byAddr)
		for i, w := range want {
			if i+1 == len(want) || want[i+1].addr != w.addr {
				fn(w)
			}
		}
		return
	}
	liveIn(d.Segments, 0, math.MaxUint64, fn)
}

// liveIn calls fn on the live blocks of segs, which are in address order,
// at addresses from lo to last, in order; of two at one address, on the
// later only.
func liveIn(segs []Segment, lo, last uint64, fn func(addrPending)) {
	var prev addrPending
	have := false
	for _, s := range segs {
		for i := range s.Blocks {
			b := &s.Blocks[i]
			if !b.State.Live() || b.Addr < lo {
				continue
			}
			if b.Addr > last {
				if have {
					fn(prev)
				}
				return
			}
			if have && prev.addr != b.Addr {
				fn(prev)
			}
			prev, have = addrPending{b.Addr, b.State == ActivePendingFree}, true
		}
	}
	if have {
		fn(prev)
	}
}

// skippedActions are the actions a trace may lack because it was recorded
// with _record_memory_history(skip_actions=[...]) (PyTorch 2.9+): one is
// missing when the trace has none of it and what no history shows without
// it, wrapped or not (the tail of a wrapped one may hold frees and no
// alloc: a teardown): segment_allocs or maps, which PyTorch makes for an
// alloc and records just before it, for alloc; minSkipEvidence of its
// partner for a free_requested or free_completed, which come in pairs but
// for the few that wait for other streams. explains are the problems its
// absence accounts for. A skipped segment_alloc is not told from a wrapped
// history whose tail frees segments (empty_cache), and reconstruction
// restores the segments either way.
var skippedActions = []struct {
	kind     trace.Kind
	evident  func(n *[kindMask + 1]int) bool
	explains []string
}{
	{trace.KindAlloc, func(n *[kindMask + 1]int) bool {
		return n[trace.KindSegmentAlloc]+n[trace.KindSegmentMap] > 0 && n[trace.KindFreeRequested]+n[trace.KindFreeCompleted] > 0
	}, []string{"free of an address that is not allocated", "free_requested twice", "block in the final state but not live after the trace"}},
	{trace.KindFreeRequested, func(n *[kindMask + 1]int) bool { return n[trace.KindFreeCompleted] >= minSkipEvidence },
		[]string{"free_completed without free_requested", "block pending state differs from the final state"}},
	{trace.KindFreeCompleted, func(n *[kindMask + 1]int) bool { return n[trace.KindFreeRequested] >= minSkipEvidence },
		[]string{"alloc at an address that is already allocated", "block live after the trace but not in the final state", "block pending state differs from the final state", "segment_free of a segment with live blocks"}},
}

// minSkipEvidence is how many free_completed (free_requested) entries
// without a free_requested (free_completed) one show that those were
// skipped.
const minSkipEvidence = 64

// skipped returns the problems, led by one that names the actions the
// trace lacks (skippedActions), without those their absence explains.
func (v *validator) skipped() []Problem {
	var missing []string
	drop := map[string]bool{}
	for _, a := range skippedActions {
		if v.kinds[a.kind] > 0 || !a.evident(&v.kinds) {
			continue
		}
		missing = append(missing, a.kind.String())
		for _, k := range a.explains {
			drop[k] = true
		}
	}
	if len(missing) == 0 {
		return v.list
	}
	out := []Problem{{Device: v.dev, Kind: fmt.Sprintf("the trace has no %s entries: recorded with skip_actions=[\"%s\"]? "+
		"Imported as recorded; what their absence implies is not reported", strings.Join(missing, " or "), strings.Join(missing, `", "`))}}
	for _, p := range v.list {
		if !drop[p.Kind] {
			out = append(out, p)
		}
	}
	return out
}

// liveRec is a live block during validation: pending free, and the
// segment that held it when it was allocated, as segCounts numbers it plus
// one (0: none). Eight bytes, so that a slot of the table of live blocks
// is 16: the table of a trace with a million blocks live is past the
// caches, and its size is what a lookup costs.
type liveRec struct {
	seg     int32
	pending bool
}

// segCounts counts the live blocks of each segment, by its base: a base
// is numbered when first seen, and its count is an element of counts
// (number-1), so that a free decrements one without a lookup.
type segCounts struct {
	ids    addrmap.Map[int32]
	counts []int
}

// add counts one more block live in the segment at base, and returns its
// number.
func (s *segCounts) add(base uint64) int32 {
	if id, ok := s.ids.Get(base); ok {
		s.counts[id-1]++
		return id
	}
	s.counts = append(s.counts, 1)
	id := int32(len(s.counts))
	s.ids.Put(base, id)
	return id
}

// live returns the blocks counted live in the segment at base.
func (s *segCounts) live(base uint64) int {
	if id, ok := s.ids.Get(base); ok {
		return s.counts[id-1]
	}
	return 0
}

// addrPending is a live block's address and whether its free is pending.
type addrPending struct {
	addr    uint64
	pending bool
}

// validator validates a device's trace, or one part of it (ValidateParts).
type validator struct {
	dev    int32
	byKind map[string]int // index into list
	list   []Problem
	kinds  [kindMask + 1]int // events of each trace.Kind
	peeked uint64            // events' peeks, kept so they are made

	part, parts int // the part of the blocks' addresses validated (partOf), of parts
	live        addrmap.Map[liveRec]
	fw          *startState // its segments
	perSeg      segCounts
	// segLive are the segment_frees that found blocks of this part live
	// in their segment, each a "segment_free of a segment with live
	// blocks" once the parts are joined.
	segLive []ProblemAt
	after   []addrPending // the part's blocks live after the trace, sorted by address
}

// validatePeek is how many events events peeks at before validating them:
// the live map's slot of each in one loop, so that the cache misses of a
// map larger than the cache overlap instead of coming one per event (as
// the replay's peek does).
const validatePeek = 16

// kindMask bounds the trace.Kinds validator.kinds counts (all of them).
const kindMask = 15

// mine reports whether e is validated by v: a block event whose address
// is in v's part, or any other event.
func (v *validator) mine(e *trace.Event) bool {
	switch e.Kind {
	case trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted:
		return v.parts == 1 || partOf(e.Addr, v.parts) == v.part
	}
	return true
}

// addSeg is add for the problems of segment events, which every part sees
// and the first reports.
func (v *validator) addSeg(kind string, ev int, addr uint64) {
	if v.part == 0 {
		v.add(kind, ev, addr)
	}
}

// track counts r, the block at a, live in the segment that holds it.
func (v *validator) track(a uint64, r *liveRec) {
	if g, ok := v.fw.segs.find(a); ok {
		r.seg = v.perSeg.add(g.addr)
	}
}

// untrack counts r no more live in its segment.
func (v *validator) untrack(r *liveRec) {
	if r.seg != 0 {
		v.perSeg.counts[r.seg-1]--
		r.seg = 0
	}
}

func (v *validator) add(kind string, ev int, addr uint64) {
	i, ok := v.byKind[kind]
	if !ok {
		i = len(v.list)
		v.byKind[kind] = i
		v.list = append(v.list, Problem{Device: v.dev, Kind: kind})
	}
	p := &v.list[i]
	p.Count++
	if len(p.Examples) < maxExamples {
		p.Examples = append(p.Examples, ProblemAt{Event: ev, Addr: addr})
	}
}
