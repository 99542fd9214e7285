package allocator

import (
	"cmp"
	"fmt"
	"slices"
)

// BlockState is a block's state as the snapshot's `state` field names it.
type BlockState uint8

const (
	Inactive          BlockState = iota // cached free
	ActiveAllocated                     // a live tensor
	ActivePendingFree                   // freed, awaiting cross-stream events
)

func (s BlockState) String() string {
	switch s {
	case ActiveAllocated:
		return "active_allocated"
	case ActivePendingFree:
		return "active_pending_free"
	}
	return "inactive"
}

// BlockInfo is one block of a SegmentInfo.
type BlockInfo struct {
	Addr      uint64
	Size      int64
	Requested int64
	State     BlockState
}

// SegmentInfo is one entry of a snapshot's `segments` list: a cudaMalloc'd
// segment, or one contiguous mapped run of an expandable segment.
type SegmentInfo struct {
	Addr       uint64
	Size       int64
	Stream     uint64
	Pool       PoolID
	Small      bool // segment_type "small"
	Expandable bool
	Blocks     []BlockInfo
}

// Segments returns the memory layout as torch.cuda.memory_snapshot() does,
// sorted by address.
func (a *Allocator) Segments() []SegmentInfo {
	var out []SegmentInfo
	for id := 1; id < len(a.blocks); id++ {
		b := &a.blocks[id]
		if !b.live || b.prev != 0 {
			continue
		}
		var cur *SegmentInfo
		for c := blockID(id); c != 0; c = a.blocks[c].next {
			cb := &a.blocks[c]
			if !cb.mapped {
				cur = nil
				continue
			}
			if cur == nil {
				cp := a.pools[cb.pool]
				out = append(out, SegmentInfo{Addr: cb.addr, Stream: cb.stream, Pool: cp.id(),
					Small: cp.small, Expandable: cb.exp != 0})
				cur = &out[len(out)-1]
			}
			st := Inactive
			if cb.allocated {
				st = ActiveAllocated
			} else if cb.events != 0 {
				st = ActivePendingFree
			}
			cur.Size += cb.size
			cur.Blocks = append(cur.Blocks, BlockInfo{Addr: cb.addr, Size: cb.size, Requested: cb.requested, State: st})
		}
	}
	slices.SortFunc(out, func(x, y SegmentInfo) int { return cmp.Compare(x.Addr, y.Addr) })
	return out
}

// Restore installs a starting state on a fresh allocator: the given
// non-expandable segments at their addresses, with their allocated and
// pending-free blocks at exact addresses and sizes. Space not covered by a
// listed block becomes free; adjacent free pieces are merged (an inactive
// listed block keeps its requested size when it heads the merged run). Stats
// are recomputed from the result, peaks equal to current, and every segment
// counts as a device malloc (num_device_alloc). Restoring
// expandable segments is not supported. The device must hand out the
// segments' addresses: a SimDevice is planned automatically.
func (a *Allocator) Restore(segs []SegmentInfo) error {
	planner, _ := a.dev.(interface{ PlanMalloc(uint64, int64) })
	if len(a.blocks) > 1 {
		return fmt.Errorf("allocator: restore: allocator is not fresh")
	}
	for _, s := range segs {
		if s.Expandable {
			return fmt.Errorf("allocator: restore: expandable segment %#x not supported", s.Addr)
		}
		pool := a.large
		if s.Small {
			pool = a.small
		}
		if !s.Pool.IsDefault() {
			a.BeginAllocateToPool(s.Pool, nil)
			a.EndAllocateToPool(s.Pool)
			a.ReleasePool(s.Pool)
			pp := a.private[s.Pool]
			pool = pp.large
			if s.Small {
				pool = pp.small
			}
			pp.mallocCount++
		}
		if planner != nil {
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
		blocks := slices.Clone(s.Blocks)
		slices.SortFunc(blocks, func(x, y BlockInfo) int { return cmp.Compare(x.Addr, y.Addr) })
		var prev blockID
		pos := s.Addr
		end := s.Addr + uint64(s.Size)
		link := func(addr uint64, size, req int64, st BlockState) {
			if prev != 0 && st == Inactive && !a.blocks[prev].allocated && a.blocks[prev].events == 0 {
				a.blocks[prev].size += size
				return
			}
			id := a.newBlock(addr, size, s.Stream, pool)
			b := &a.blocks[id]
			b.requested = req
			b.prev = prev
			if prev != 0 {
				a.blocks[prev].next = id
			}
			switch st {
			case ActiveAllocated:
				b.allocated = true
			case ActivePendingFree:
				b.events = 1
				a.pending = append(a.pending, id)
			}
			prev = id
		}
		for _, bl := range blocks {
			if bl.Addr < pos || bl.Addr+uint64(bl.Size) > end || bl.Size <= 0 {
				return fmt.Errorf("allocator: restore segment %#x: block %#x+%d overlaps or leaves the segment", s.Addr, bl.Addr, bl.Size)
			}
			if bl.Addr > pos {
				link(pos, int64(bl.Addr-pos), 0, Inactive)
			}
			link(bl.Addr, bl.Size, bl.Requested, bl.State)
			pos = bl.Addr + uint64(bl.Size)
		}
		if pos < end {
			link(pos, int64(end-pos), 0, Inactive)
		}
	}
	// Index and recompute stats.
	for id := blockID(1); int(id) < len(a.blocks); id++ {
		b := &a.blocks[id]
		if !b.live {
			continue
		}
		if b.allocated || b.events != 0 {
			if a.indexed {
				a.active.Put(b.addr, id)
			}
		} else {
			a.insertFree(id)
		}
	}
	want := a.recompute()
	a.stats.Allocation, a.stats.Segment, a.stats.Active = want.Allocation, want.Segment, want.Active
	a.stats.InactiveSplit, a.stats.AllocatedBytes, a.stats.ReservedBytes = want.InactiveSplit, want.AllocatedBytes, want.ReservedBytes
	a.stats.ActiveBytes, a.stats.InactiveSplitBytes, a.stats.RequestedBytes = want.ActiveBytes, want.InactiveSplitBytes, want.RequestedBytes
	a.activeApart = true
	for _, arr := range a.stats.arrays() {
		for i := range arr.s {
			arr.s[i].Peak = arr.s[i].Current
		}
	}
	return nil
}

func (a *Allocator) sortedPrivate() []PoolID {
	ids := make([]PoolID, 0, len(a.private))
	for id := range a.private {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y PoolID) int {
		if c := cmp.Compare(x.A, y.A); c != 0 {
			return c
		}
		return cmp.Compare(x.B, y.B)
	})
	return ids
}
