package record

import (
	"cmp"
	"slices"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// privatePools holds the segments a snapshot reports as owned by a private
// pool (a CUDA graph capture or a MemPool), sorted by address so that an
// event's segment is a binary search: tagging a trace costs O(log pools) an
// event, not a scan of every pool's segments.
type privatePools struct {
	segs []torchsnap.Segment
	// born holds, for each of segs, the time of the recording's last
	// segment_alloc at its base (0: none): the segment the dump shows was
	// made then, and an allocation before it at its addresses was in an
	// earlier segment there, which may have been another pool's.
	born []int64
	// overlap is set when two segments overlap (a malformed snapshot): the
	// first of the snapshot's order that holds an address wins, as before
	// sorting, so segs keeps that order and is scanned.
	overlap bool
	visits  int // segments examined, for the tests
	// aliases are the pools the inference invents that are others
	// (replay.DeviceResult.Aliases), found by findEmptyCaches and used by
	// every later pass over the device.
	aliases map[allocator.PoolID]allocator.PoolID
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
	if len(sorted) > 0 {
		p.births(d)
	}
	return p
}

// ids returns the pools of p's segments, each once, in the order of their
// first segment (a set: a snapshot of one CUDA graph per segment names as
// many pools as segments).
func (p *privatePools) ids() []allocator.PoolID {
	var out []allocator.PoolID
	if p == nil {
		return nil
	}
	seen := make(map[allocator.PoolID]struct{}, len(p.segs))
	for _, s := range p.segs {
		p.visits++
		id := allocator.PoolID{A: s.Pool.A, B: s.Pool.B}
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}

// births fills p.born from d's segment_alloc events. A device whose
// events cannot be read has none: every allocation at a segment's
// addresses is then taken for its pool, as the events' reader will report.
func (p *privatePools) births(d *torchsnap.Device) {
	p.born = make([]int64, len(p.segs))
	var buf []trace.Event
	for lo := int64(0); lo < d.Len(); lo += torchsnap.ChunkSize {
		hi := min(lo+torchsnap.ChunkSize, d.Len())
		if int64(cap(buf)) < hi-lo {
			buf = make([]trace.Event, hi-lo)
		}
		evs, err := d.Chunk(lo, hi, buf)
		if err != nil {
			clear(p.born)
			return
		}
		for i := range evs {
			if ev := &evs[i]; ev.Kind == trace.KindSegmentAlloc {
				if k, ok := p.index(ev.Addr); ok && p.segs[k].Addr == ev.Addr {
					p.born[k] = ev.TimeUs
				}
			}
		}
	}
}

// pool returns the pool of the private segment holding addr, if ev, at
// that address, came after the segment was made.
func (p *privatePools) pool(ev *trace.Event) (trace.PoolID, bool) {
	k, ok := p.index(ev.Addr)
	if !ok || len(p.born) > 0 && ev.TimeUs < p.born[k] {
		return trace.PoolID{}, false
	}
	return p.segs[k].Pool, true
}

// index returns the index in segs of the private segment holding addr.
func (p *privatePools) index(addr uint64) (int, bool) {
	if p.overlap {
		for i := range p.segs {
			p.visits++
			if s := &p.segs[i]; addr >= s.Addr && addr < s.Addr+uint64(s.TotalSize) {
				return i, true
			}
		}
		return 0, false
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
		return 0, false
	}
	if s := &p.segs[lo-1]; addr < s.Addr+uint64(s.TotalSize) {
		return lo - 1, true
	}
	return 0, false
}

// poolAliases returns p's aliases; nil for a nil p.
func (p *privatePools) poolAliases() map[allocator.PoolID]allocator.PoolID {
	if p == nil {
		return nil
	}
	return p.aliases
}

// alias adds the pool aliases the replay res found to p's, and reports
// whether there was a new one.
func (p *privatePools) alias(res *replay.Result) bool {
	if p == nil {
		return false
	}
	added := false
	for _, dr := range res.Devices {
		for x, q := range dr.Aliases {
			if _, ok := p.aliases[x]; !ok {
				if p.aliases == nil {
					p.aliases = map[allocator.PoolID]allocator.PoolID{}
				}
				p.aliases[x], added = q, true
			}
		}
	}
	return added
}

// tagPools sets Event.Pool on the allocations and segment events that lie
// in a private segment of p. torch 2.11's trace entries carry no pool id;
// without it a replay would serve those requests from the default pools.
// Only segments alive at the dump are known: a private segment freed before
// it is not tagged, nor is an allocation made at a dumped segment's
// addresses before that segment was (an earlier segment there, released
// by an empty_cache(), may have been another pool's: the default pools'
// of a stream that warmed a graph up before torch.cuda.graph released it).
func tagPools(evs []trace.Event, p *privatePools) {
	if len(p.segs) == 0 {
		return
	}
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case trace.KindAlloc, trace.KindSegmentAlloc, trace.KindSegmentMap:
			if id, ok := p.pool(ev); ok {
				ev.Pool = id
			}
		}
	}
}
