package allocator

import (
	"cmp"
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

// poolWork counts the private pools sortedFreeable returns, for the test
// that bounds the work of an empty_cache.
var poolWork int

// oomWork counts the free blocks an OOM's message sums, for the test that
// bounds the work of an OOM (BriefOOMs).
var oomWork int

func addPoolWork(n int) {
	if countWork {
		poolWork += n
	}
}

// sortedFreeable returns the private pools without uses that an
// empty_cache of pool id visits, by id: all of them for the default pool,
// else id alone if it is freeable. The pools in use (every pool a replay
// holds, one per CUDA graph) are never looked at, so that an empty_cache
// per capture costs the freeable pools, not all pools made so far.
func (a *Allocator) sortedFreeable(id PoolID) []PoolID {
	if !id.IsDefault() {
		if a.freeable[id] == nil {
			return nil
		}
		addPoolWork(1)
		return []PoolID{id}
	}
	ids := make([]PoolID, 0, len(a.freeable))
	for pid := range a.freeable {
		ids = append(ids, pid)
	}
	addPoolWork(len(ids))
	slices.SortFunc(ids, comparePools)
	return ids
}

func comparePools(x, y PoolID) int {
	if c := cmp.Compare(x.A, y.A); c != 0 {
		return c
	}
	return cmp.Compare(x.B, y.B)
}

func (a *Allocator) sortedPrivate() []PoolID {
	ids := make([]PoolID, 0, len(a.private))
	for id := range a.private {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, comparePools)
	return ids
}
