package record

import (
	"cmp"
	"slices"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/trace"
)

// privatePools holds the segments a snapshot reports as owned by a private
// pool (a CUDA graph capture or a MemPool), sorted by address so that an
// event's segment is a binary search: tagging a trace costs O(log pools) an
// event, not a scan of every pool's segments.
type privatePools struct {
	segs []torchsnap.Segment
	// overlap is set when two segments overlap (a malformed snapshot): the
	// first of the snapshot's order that holds an address wins, as before
	// sorting, so segs keeps that order and is scanned.
	overlap bool
	visits  int // segments examined, for the tests
}

// privateSegments returns d's private-pool segments, indexed.
func privateSegments(d *torchsnap.Device) *privatePools {
	p := &privatePools{}
	for _, s := range d.Segments {
		if !s.Pool.IsDefault() {
			p.segs = append(p.segs, s)
		}
	}
	sorted := slices.Clone(p.segs)
	slices.SortStableFunc(sorted, func(a, b torchsnap.Segment) int { return cmp.Compare(a.Addr, b.Addr) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Addr < sorted[i-1].Addr+uint64(sorted[i-1].TotalSize) {
			p.overlap = true
			return p
		}
	}
	p.segs = sorted
	return p
}

// ids returns the pools of p's segments, each once.
func (p *privatePools) ids() []allocator.PoolID {
	var out []allocator.PoolID
	if p == nil {
		return nil
	}
	for _, s := range p.segs {
		id := allocator.PoolID{A: s.Pool.A, B: s.Pool.B}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// pool returns the pool of the private segment holding addr.
func (p *privatePools) pool(addr uint64) (trace.PoolID, bool) {
	if p.overlap {
		for i := range p.segs {
			p.visits++
			if s := &p.segs[i]; addr >= s.Addr && addr < s.Addr+uint64(s.TotalSize) {
				return s.Pool, true
			}
		}
		return trace.PoolID{}, false
	}
	lo, hi := 0, len(p.segs) // the first segment starting after addr
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		p.visits++
		if p.segs[m].Addr <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return trace.PoolID{}, false
	}
	if s := &p.segs[lo-1]; addr < s.Addr+uint64(s.TotalSize) {
		return s.Pool, true
	}
	return trace.PoolID{}, false
}

// tagPools sets Event.Pool on the allocations and segment events that lie
// in a private segment of p. torch 2.11's trace entries carry no pool id;
// without it a replay would serve those requests from the default pools.
// Only segments alive at the dump are known: a private segment freed before
// it is not tagged.
func tagPools(evs []trace.Event, p *privatePools) {
	if len(p.segs) == 0 {
		return
	}
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case trace.KindAlloc, trace.KindSegmentAlloc, trace.KindSegmentMap:
			if id, ok := p.pool(ev.Addr); ok {
				ev.Pool = id
			}
		}
	}
}
