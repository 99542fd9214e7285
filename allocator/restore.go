package allocator

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tracer-dev/tracer/internal/grow"
)

// Restore installs a starting state on a fresh allocator: the given
// segments at their addresses, with their allocated and pending-free blocks
// at exact addresses and sizes. Space not covered by a listed block becomes
// free; adjacent free pieces are merged (an inactive listed block keeps its
// requested size when it heads the merged run). Stats are recomputed from
// the result, peaks equal to current, and every segment, and every mapped
// range of an expandable segment, counts as a device malloc
// (num_device_alloc).
//
// An expandable segment is given as its mapped ranges (Expandable set), as
// a snapshot lists them. The ranges of one stream and pool that fit in one
// reservation (⌈1.125 × total / page⌉ pages) are restored as one
// ExpandableSegment reserved from the lowest of them, mapped where they
// are and unmapped between them and after the last; where the pages of the
// configured page size do not tile them (a replay under another
// large_segment_size_mb), the segment's page is the largest size that does.
// Pages the history unmapped below the lowest range are not known and not
// reserved.
//
// The device must hand out the segments' addresses: a SimDevice is planned
// automatically.
func (a *Allocator) Restore(segs []SegmentInfo) error {
	if len(a.blocks) > 1 {
		return fmt.Errorf("allocator: restore: allocator is not fresh")
	}
	if n := len(a.blocks) + restoreCount(segs); cap(a.blocks) < n {
		a.blocks = grow.Double(a.blocks, n)
	}
	var exp []SegmentInfo
	for _, s := range segs {
		if s.Expandable {
			exp = append(exp, s)
			continue
		}
		if err := a.restoreSegment(s); err != nil {
			return err
		}
	}
	if err := a.restoreExpandable(exp); err != nil {
		return err
	}
	// Index and recompute stats.
	for id := blockID(1); int(id) < len(a.blocks); id++ {
		b := &a.blocks[id]
		switch {
		case !b.live:
		case b.allocated || b.events != 0:
			if a.indexed {
				a.active.Put(b.addr, id)
			}
		case !b.mapped:
			a.pools[b.pool].unmappedSet().ReplaceOrInsert(a.ukey(id))
		default:
			a.insertFree(id)
		}
	}
	want := a.recompute()
	a.stats.Allocation, a.stats.Segment, a.stats.Active = want.Allocation, want.Segment, want.Active
	a.stats.InactiveSplit, a.stats.AllocatedBytes, a.stats.ReservedBytes = want.InactiveSplit, want.AllocatedBytes, want.ReservedBytes
	a.stats.ActiveBytes, a.stats.InactiveSplitBytes, a.stats.RequestedBytes = want.ActiveBytes, want.InactiveSplitBytes, want.RequestedBytes
	for _, arr := range a.stats.arrays() {
		for i := range arr.s {
			arr.s[i].Peak = arr.s[i].Current
		}
	}
	// Active and ActiveBytes stay shared with Allocation and
	// AllocatedBytes (activeStats) unless a restored block is pending.
	a.activeApart = a.stats.Active != a.stats.Allocation || a.stats.ActiveBytes != a.stats.AllocatedBytes
	return nil
}

// restorePool returns the block pool a restored segment belongs to, making
// its private pool (kept in use by nothing, as one whose capture ended) if
// need be.
func (a *Allocator) restorePool(s *SegmentInfo) *blockPool {
	if s.Pool.IsDefault() {
		if s.Small {
			return a.small
		}
		return a.large
	}
	a.BeginAllocateToPool(s.Pool, nil)
	a.EndAllocateToPool(s.Pool)
	a.ReleasePool(s.Pool)
	pp := a.private[s.Pool]
	pp.mallocCount++
	return a.blocksOf(pp, s.Small)
}

// restoreSegment restores a cudaMalloc'd segment.
func (a *Allocator) restoreSegment(s SegmentInfo) error {
	pool := a.restorePool(&s)
	if planner, ok := a.dev.(interface{ PlanMalloc(uint64, int64) }); ok {
		planner.PlanMalloc(s.Addr, s.Size)
	}
	if addr, err := a.dev.Malloc(s.Size); err != nil || addr != s.Addr {
		return fmt.Errorf("allocator: restore segment %#x: device gave %#x: %v", s.Addr, addr, err)
	}
	a.totalMem += s.Size
	// Each segment was a cudaMalloc before the history began: counted
	// as one, as memory_stats() counted it and as tracer info counts
	// the reconstructed segment_alloc it comes from (those freed before
	// the history began are unknown to both).
	a.stats.NumDeviceAlloc++
	l := chain{a: a, pool: pool, stream: s.Stream}
	return l.tile(&s)
}

// chain links the blocks of one segment in address order as Restore makes
// them.
type chain struct {
	a      *Allocator
	pool   *blockPool
	stream uint64
	exp    expIdx
	prev   blockID
}

// link appends a block; a free mapped one merges into a free mapped
// predecessor.
func (l *chain) link(addr uint64, size, req int64, st BlockState, mapped bool) {
	a := l.a
	if p := l.prev; p != 0 && st == Inactive && mapped && a.blocks[p].mapped && !a.blocks[p].allocated && a.blocks[p].events == 0 {
		a.blocks[p].size += size
		return
	}
	id := a.newBlock(addr, size, l.stream, l.pool)
	b := &a.blocks[id]
	b.requested, b.prev, b.exp, b.mapped = req, l.prev, l.exp, mapped
	if l.prev != 0 {
		a.blocks[l.prev].next = id
	}
	switch st {
	case ActiveAllocated:
		b.allocated = true
	case ActivePendingFree:
		b.events = 1
		a.pending = append(a.pending, id)
	}
	l.prev = id
}

// restoreCount returns at least the number of blocks Restore makes of
// segs, so that the arena grows once for them: each listed block, the free
// space before each and after the last, and for a mapped range of an
// expandable segment the unmapped space before it and after it. It is
// exact for a segment whose blocks are sorted and neither free nor
// overlapping.
func restoreCount(segs []SegmentInfo) int {
	n := 0
	for i := range segs {
		s := &segs[i]
		if s.Expandable {
			n += 2
		}
		if !slices.IsSortedFunc(s.Blocks, blockOrder) {
			n += 2*len(s.Blocks) + 1
			continue
		}
		pos := s.Addr
		for _, b := range s.Blocks {
			if b.Addr > pos {
				n++
			}
			n++
			pos = b.Addr + uint64(max(b.Size, 0))
		}
		if pos < s.Addr+uint64(s.Size) {
			n++
		}
	}
	return n
}

func blockOrder(x, y BlockInfo) int { return cmp.Compare(x.Addr, y.Addr) }

// tile links s's blocks, and free blocks in the space between them. It
// reads sorted blocks in place (a restore from a trace gives them so) and
// sorts a copy of others.
func (l *chain) tile(s *SegmentInfo) error {
	blocks := s.Blocks
	if !slices.IsSortedFunc(blocks, blockOrder) {
		blocks = slices.Clone(blocks)
		slices.SortFunc(blocks, blockOrder)
	}
	pos, end := s.Addr, s.Addr+uint64(s.Size)
	for _, bl := range blocks {
		if bl.Addr < pos || bl.Addr+uint64(bl.Size) > end || bl.Size <= 0 {
			return fmt.Errorf("allocator: restore segment %#x: block %#x+%d overlaps or leaves the segment", s.Addr, bl.Addr, bl.Size)
		}
		if bl.Addr > pos {
			l.link(pos, int64(bl.Addr-pos), 0, Inactive, true)
		}
		l.link(bl.Addr, bl.Size, bl.Requested, bl.State, true)
		pos = bl.Addr + uint64(bl.Size)
	}
	if pos < end {
		l.link(pos, int64(end-pos), 0, Inactive, true)
	}
	return nil
}

// restoreExpandable restores the mapped ranges of expandable segments as
// Restore describes.
func (a *Allocator) restoreExpandable(segs []SegmentInfo) error {
	if len(segs) == 0 {
		return nil
	}
	_, total, err := a.dev.MemInfo()
	if err != nil {
		return fmt.Errorf("allocator: memory info: %w", err)
	}
	segs = slices.Clone(segs)
	slices.SortFunc(segs, func(x, y SegmentInfo) int {
		return cmp.Or(cmp.Compare(x.Pool.A, y.Pool.A), cmp.Compare(x.Pool.B, y.Pool.B), cmpBool(x.Small, y.Small),
			cmp.Compare(x.Stream, y.Stream), cmp.Compare(x.Addr, y.Addr))
	})
	for i := 0; i < len(segs); {
		s := &segs[i]
		page := a.conf.LargeSegmentSize
		if s.Small {
			page = a.conf.SmallBuffer
		}
		span := reservationSize(total, page)
		j := i + 1
		for j < len(segs) && segs[j].Pool == s.Pool && segs[j].Small == s.Small && segs[j].Stream == s.Stream &&
			int64(segs[j].Addr-s.Addr)+segs[j].Size <= span {
			j++
		}
		if err := a.restoreReservation(segs[i:j], page, total); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func cmpBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case x:
		return 1
	}
	return -1
}

// restoreReservation restores the mapped ranges of one ExpandableSegment,
// sorted by address, under page size page.
func (a *Allocator) restoreReservation(ranges []SegmentInfo, page, total int64) error {
	base := ranges[0].Addr
	for _, r := range ranges {
		page = gcd(gcd(page, int64(r.Addr-base)), r.Size)
	}
	if page <= 0 || page%a.conf.MinBlockSize != 0 {
		return fmt.Errorf("allocator: restore expandable segment %#x: its ranges are not whole pages", base)
	}
	last := &ranges[len(ranges)-1]
	size := max(reservationSize(total, page), int64(last.Addr-base)+last.Size)
	pool := a.restorePool(&ranges[0])
	if planner, ok := a.dev.(interface{ PlanReserve(uint64) }); ok {
		planner.PlanReserve(base)
	}
	if addr, err := a.dev.Reserve(size); err != nil || addr != base {
		return fmt.Errorf("allocator: restore expandable segment %#x: device reserved %#x: %v", base, addr, err)
	}
	if len(a.expTab) == 0 {
		a.expTab = append(a.expTab, nil)
	}
	e := a.newExp(expSegment{base: base, size: size, page: page, stream: ranges[0].Stream, pool: pool, idx: expIdx(len(a.expTab))})
	a.expTab = append(a.expTab, e)
	a.addExp(e)
	l := chain{a: a, pool: pool, stream: e.stream, exp: e.idx}
	pos := base
	for i := range ranges {
		r := &ranges[i]
		if r.Addr < pos || r.Size <= 0 {
			return fmt.Errorf("allocator: restore expandable segment %#x: range %#x+%d overlaps another", base, r.Addr, r.Size)
		}
		if r.Addr > pos {
			l.link(pos, int64(r.Addr-pos), 0, Inactive, false)
		}
		if err := a.dev.Map(r.Addr, r.Size); err != nil {
			return fmt.Errorf("allocator: restore expandable segment %#x: map %#x+%d: %w", base, r.Addr, r.Size, err)
		}
		a.totalMem += r.Size
		a.stats.NumDeviceAlloc++ // a map, as the reconstructed segment_map it comes from
		if err := l.tile(r); err != nil {
			return err
		}
		pos = r.Addr + uint64(r.Size)
	}
	if end := base + uint64(size); pos < end {
		l.link(pos, int64(end-pos), 0, Inactive, false)
	}
	return nil
}

func gcd(x, y int64) int64 {
	for y != 0 {
		x, y = y, x%y
	}
	return x
}
