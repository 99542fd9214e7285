package allocator

import (
	"errors"
	"fmt"
)

// CheckInvariants verifies the allocator's internal consistency and returns
// every violation joined: blocks tile their segments, the free sets hold
// exactly the free blocks, no two adjacent free blocks could merge, the
// address index is right, and the stats equal values recomputed from the
// blocks (§11 invariants).
func (a *Allocator) CheckInvariants() error {
	var errs []error
	bad := func(f string, args ...any) { errs = append(errs, fmt.Errorf(f, args...)) }

	inFree := make(map[blockID]bool)
	inUnmapped := make(map[blockID]bool)
	pools := []*blockPool{a.small, a.large}
	for _, id := range a.sortedPrivate() {
		pools = append(pools, a.private[id].blockPools()...)
	}
	for _, p := range pools {
		member := func(k freeKey) bool {
			b := &a.blocks[k.id]
			if !b.live || a.pools[b.pool] != p || b.allocated || b.events != 0 || !b.mapped {
				bad("free set holds block %d (%#x) that is not a free mapped block of the pool", k.id, k.addr)
			} else if k != a.key(k.id) {
				bad("free set key %+v is stale for block %#x size %d", k, b.addr, b.size)
			}
			if inFree[k.id] {
				bad("free set holds block %d (%#x) twice", k.id, k.addr)
			}
			inFree[k.id] = true
			return true
		}
		// The pending member is checked where it is: a check that put it
		// into its class would change what the next step does.
		for j, k := range p.blocks.pend {
			if k.id == 0 {
				continue
			}
			if j == 2 && (!a.conf.ExpandableSegments || a.blocks[k.id].exp == 0) {
				bad("pending segment end %d (%#x) is not an expandable segment's under expandable_segments", k.id, k.addr)
			}
			if k.stream != p.blocks.lastSt || a.blocks[k.id].exp != 0 && !a.conf.ExpandableSegments {
				bad("pending free block %d (%#x) is on stream %d, not the last found, or expandable without expandable_segments", k.id, k.addr, k.stream)
			}
			member(k)
		}
		p.blocks.ascendClasses(member)
		p.unmapped.Ascend(func(k freeKey) bool {
			b := &a.blocks[k.id]
			if !b.live || b.mapped || k != a.ukey(k.id) {
				bad("unmapped set holds block %d (%#x) that is not an unmapped block", k.id, k.addr)
			}
			inUnmapped[k.id] = true
			return true
		})
	}
	for id := blockID(1); int(id) < len(a.blocks); id++ {
		b := &a.blocks[id]
		if !b.live {
			if *b != (block{}) {
				bad("dead block %d is not zero (newBlock relies on it)", id)
			}
			continue
		}
		if b.size <= 0 || (b.mapped && b.size%a.conf.MinBlockSize != 0) {
			bad("block %#x has size %d", b.addr, b.size)
		}
		if b.next != 0 {
			n := &a.blocks[b.next]
			if n.prev != id || n.addr != b.addr+uint64(b.size) || n.stream != b.stream || n.pool != b.pool || n.exp != b.exp {
				bad("block %#x+%d and its next %#x do not tile one segment", b.addr, b.size, n.addr)
			}
			free := func(x *block) bool { return !x.allocated && x.events == 0 && !x.used }
			if free(b) && free(n) && b.mapped == n.mapped {
				bad("adjacent free blocks %#x and %#x are not merged", b.addr, n.addr)
			}
		}
		free := !b.allocated && b.events == 0
		switch {
		case free && b.mapped && !inFree[id]:
			bad("free block %#x size %d missing from its free set", b.addr, b.size)
		case !b.mapped && !inUnmapped[id]:
			bad("unmapped block %#x missing from the unmapped set", b.addr)
		case !free && a.indexed && a.activeID(b.addr) != id:
			bad("active block %#x missing from the address index", b.addr)
		}
		if !b.mapped && b.exp == 0 {
			bad("unmapped block %#x outside an expandable segment", b.addr)
		}
	}
	a.active.All(func(addr uint64, idp *blockID) {
		id := *idp
		b := &a.blocks[id]
		if !b.live || b.addr != addr || (!b.allocated && b.events == 0) {
			bad("address index maps %#x to a block that is not active there", addr)
		}
	})
	want := a.recompute()
	got := a.activeStats()
	cmpArr := func(name string, g, w StatArray) {
		for i := range g {
			if g[i].Current != w[i].Current {
				bad("stat %s.%s.current = %d, blocks say %d", name, statTypeNames[i], g[i].Current, w[i].Current)
			}
			if g[i].Peak < g[i].Current {
				bad("stat %s.%s.peak %d < current %d", name, statTypeNames[i], g[i].Peak, g[i].Current)
			}
		}
	}
	cmpArr("allocation", got.Allocation, want.Allocation)
	cmpArr("allocated_bytes", got.AllocatedBytes, want.AllocatedBytes)
	cmpArr("active", got.Active, want.Active)
	cmpArr("active_bytes", got.ActiveBytes, want.ActiveBytes)
	cmpArr("requested_bytes", got.RequestedBytes, want.RequestedBytes)
	cmpArr("segment", got.Segment, want.Segment)
	cmpArr("reserved_bytes", got.ReservedBytes, want.ReservedBytes)
	cmpArr("inactive_split", got.InactiveSplit, want.InactiveSplit)
	cmpArr("inactive_split_bytes", got.InactiveSplitBytes, want.InactiveSplitBytes)
	if a.totalMem != got.ReservedBytes[0].Current {
		bad("total_allocated_memory %d != reserved_bytes %d", a.totalMem, got.ReservedBytes[0].Current)
	}
	// With expandable segments PyTorch checks the limit against
	// get_allocation_size but maps whole pages of the rounded size, so
	// reserved memory may pass the limit (§7.1, §9); only plain segments obey it.
	if a.limit > 0 && a.totalMem > a.limit && len(a.exps) == 0 {
		bad("reserved %d exceeds the memory limit %d", a.totalMem, a.limit)
	}
	return errors.Join(errs...)
}

// recompute derives the current values of the block-level stats.
func (a *Allocator) recompute() Stats {
	var s Stats
	for id := 1; id < len(a.blocks); id++ {
		b := &a.blocks[id]
		if !b.live {
			continue
		}
		t := a.statTypes(a.pools[b.pool])
		if b.mapped {
			s.ReservedBytes.inc(t, b.size)
		}
		if b.prev == 0 && b.exp == 0 {
			s.Segment.inc(t, 1)
		}
		if b.allocated {
			s.Allocation.inc(t, 1)
			s.AllocatedBytes.inc(t, b.size)
		}
		if b.allocated || b.events != 0 {
			s.Active.inc(t, 1)
			s.ActiveBytes.inc(t, b.size)
			s.RequestedBytes.inc(t, b.requested)
		} else if b.exp == 0 && b.isSplit() {
			s.InactiveSplit.inc(t, 1)
			s.InactiveSplitBytes.inc(t, b.size)
		}
	}
	s.sum()
	return s
}
