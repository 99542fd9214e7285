package torchsnap

import (
	"fmt"
	"slices"
	"sort"
	"strings"

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
// consistent.
func (d *Device) Validate() []Problem {
	v := &validator{dev: d.Index, byKind: map[string]int{}}
	st := newStartState(d)
	st.undo(d.Events)
	segs := st.segs
	live := make(map[uint64]bool, len(st.blocks)) // addr → pending free
	for a, b := range st.blocks {
		live[a] = b.pending
	}
	fw := &startState{segs: segs}
	// Live blocks per segment base, so segment_free is checked in O(1).
	inSeg := map[uint64]uint64{} // block addr → base of the segment holding it
	perSeg := map[uint64]int{}
	track := func(a uint64) {
		if j, ok := fw.find(a); ok {
			inSeg[a] = fw.segs[j].addr
			perSeg[fw.segs[j].addr]++
		}
	}
	untrack := func(a uint64) {
		if base, ok := inSeg[a]; ok {
			perSeg[base]--
			delete(inSeg, a)
		}
	}
	for a := range live {
		track(a)
	}
	for i := range d.Events {
		e := &d.Events[i]
		switch e.Kind {
		case trace.KindAlloc:
			if _, ok := live[e.Addr]; ok {
				v.add("alloc at an address that is already allocated", i, e.Addr)
			}
			if _, ok := fw.find(e.Addr); !ok {
				v.add("alloc outside every segment", i, e.Addr)
			}
			untrack(e.Addr)
			track(e.Addr)
			live[e.Addr] = false
		case trace.KindFreeRequested:
			pending, ok := live[e.Addr]
			switch {
			case !ok:
				v.add("free of an address that is not allocated", i, e.Addr)
			case pending:
				v.add("free_requested twice", i, e.Addr)
			}
			live[e.Addr] = true
		case trace.KindFreeCompleted:
			pending, ok := live[e.Addr]
			switch {
			case !ok:
				v.add("free of an address that is not allocated", i, e.Addr)
			case !pending:
				v.add("free_completed without free_requested", i, e.Addr)
			}
			delete(live, e.Addr)
			untrack(e.Addr)
		case trace.KindSegmentAlloc:
			if j, ok := fw.find(e.Addr); ok || (j < len(fw.segs) && fw.segs[j].addr < e.Addr+uint64(e.Size)) {
				v.add("segment_alloc over an existing segment", i, e.Addr)
			}
			fw.insert(&segRange{addr: e.Addr, size: e.Size, stream: e.Stream})
		case trace.KindSegmentFree:
			j, ok := fw.find(e.Addr)
			if !ok || fw.segs[j].addr != e.Addr {
				v.add("segment_free of an unknown segment", i, e.Addr)
				break
			}
			if perSeg[e.Addr] > 0 {
				v.add("segment_free of a segment with live blocks", i, e.Addr)
			}
			fw.segs = slices.Delete(fw.segs, j, j+1)
		case trace.KindSegmentMap:
			if _, ok := fw.find(e.Addr); ok {
				v.add("segment_map of mapped memory", i, e.Addr)
			}
			fw.unmap(e) // undoing an unmap is mapping
		case trace.KindSegmentUnmap:
			if _, ok := fw.find(e.Addr); !ok {
				v.add("segment_unmap of unmapped memory", i, e.Addr)
			}
			fw.cut(e.Addr, e.Size)
		}
	}
	// The final state must be the dumped one.
	want := map[uint64]bool{}
	for _, s := range d.Segments {
		for _, b := range s.Blocks {
			if b.State.Live() {
				want[b.Addr] = b.State == ActivePendingFree
			}
		}
	}
	for _, a := range sortedKeys(live) {
		if w, ok := want[a]; !ok {
			v.add("block live after the trace but not in the final state", -1, a)
		} else if w != live[a] {
			v.add("block pending state differs from the final state", -1, a)
		}
	}
	for _, a := range sortedKeys(want) {
		if _, ok := live[a]; !ok {
			v.add("block in the final state but not live after the trace", -1, a)
		}
	}
	return v.list
}

func sortedKeys(m map[uint64]bool) []uint64 {
	ks := make([]uint64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

type validator struct {
	dev    int32
	byKind map[string]int // index into list
	list   []Problem
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
