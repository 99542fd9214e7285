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
// event, not a scan of every pool's segments. The segments are kept as
// columns (addr, end, pool), not copies of torchsnap.Segment: the search
// reads 8 bytes a step, not a 112-byte record, and the columns hold no
// pointers for the collector to scan.
type privatePools struct {
	addr, end []uint64 // each segment's range [addr, end)
	pools     []trace.PoolID
	// born holds, for each segment, the time of the recording's last
	// segment_alloc at its base (0: none): the segment the dump shows was
	// made then, and an allocation before it at its addresses was in an
	// earlier segment there, which may have been another pool's.
	born []int64
	// overlap is set when two segments overlap (a malformed snapshot): the
	// first of the snapshot's order that holds an address wins, as before
	// sorting, so the columns keep that order and are scanned.
	overlap bool
	visits  int // segments examined, for the tests
	// aliases are the pools the inference invents that are others
	// (replay.DeviceResult.Aliases), found by findEmptyCaches and used by
	// every later pass over the device.
	aliases map[allocator.PoolID]allocator.PoolID
}

// privateSegments returns d's private-pool segments, indexed. A snapshot
// lists its segments by address, so they are sorted only when they are
// not; the sort breaks ties by the snapshot's order.
func privateSegments(d *torchsnap.Device) *privatePools {
	p, sorted := privateColumns(d)
	if !sorted {
		p.sortByAddr()
	}
	for i := 1; i < len(p.addr); i++ {
		if p.addr[i] < p.end[i-1] {
			if !sorted {
				p, _ = privateColumns(d)
			}
			p.overlap = true
			return p
		}
	}
	if len(p.addr) > 0 {
		p.births(d)
	}
	return p
}

// privateColumns returns d's private-pool segments in the snapshot's
// order, and whether that order is by address.
func privateColumns(d *torchsnap.Device) (p *privatePools, sorted bool) {
	n := 0
	for i := range d.Segments {
		if !d.Segments[i].Pool.IsDefault() {
			n++
		}
	}
	p = &privatePools{addr: make([]uint64, 0, n), end: make([]uint64, 0, n), pools: make([]trace.PoolID, 0, n)}
	sorted = true
	for i := range d.Segments {
		if s := &d.Segments[i]; !s.Pool.IsDefault() {
			if k := len(p.addr); k > 0 && s.Addr < p.addr[k-1] {
				sorted = false
			}
			p.addr = append(p.addr, s.Addr)
			p.end = append(p.end, s.Addr+uint64(s.TotalSize))
			p.pools = append(p.pools, s.Pool)
		}
	}
	return p, sorted
}

// sortByAddr sorts p's columns by address, equal addresses in their
// present order.
func (p *privatePools) sortByAddr() {
	perm := make([]int32, len(p.addr))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortFunc(perm, func(a, b int32) int {
		return cmp.Or(cmp.Compare(p.addr[a], p.addr[b]), cmp.Compare(a, b))
	})
	addr, end, pools := make([]uint64, len(perm)), make([]uint64, len(perm)), make([]trace.PoolID, len(perm))
	for i, k := range perm {
		addr[i], end[i], pools[i] = p.addr[k], p.end[k], p.pools[k]
	}
	p.addr, p.end, p.pools = addr, end, pools
}

// ids returns the pools of p's segments, each once, in the order of their
// first segment (a set: a snapshot of one CUDA graph per segment names as
// many pools as segments).
func (p *privatePools) ids() []allocator.PoolID {
	var out []allocator.PoolID
	if p == nil {
		return nil
	}
	seen := make(map[allocator.PoolID]struct{}, len(p.pools))
	for _, q := range p.pools {
		p.visits++
		id := allocator.PoolID{A: q.A, B: q.B}
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
	p.born = make([]int64, len(p.addr))
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
				if k, ok := p.index(ev.Addr); ok && p.addr[k] == ev.Addr {
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
	return p.pools[k], true
}

// index returns the index in the columns of the private segment holding addr.
func (p *privatePools) index(addr uint64) (int, bool) {
	if p.overlap {
		for i := range p.addr {
			p.visits++
			if addr >= p.addr[i] && addr < p.end[i] {
				return i, true
			}
		}
		return 0, false
	}
	lo, hi := 0, len(p.addr) // the first segment starting after addr
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		p.visits++
		if p.addr[m] <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, false
	}
	if addr < p.end[lo-1] {
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
	if len(p.addr) == 0 {
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
