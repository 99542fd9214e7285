package allocator

import (
	"errors"
	"fmt"
)

// allocBlock is alloc_block (§7.1): a new segment (or expandable mapping) for
// r. It returns 0 without error when the memory limit or the device refuses
// with out of memory; other device failures are errors.
func (a *Allocator) allocBlock(r *request, retry bool) (blockID, error) {
	if retry {
		a.stats.NumAllocRetries++
	}
	if a.limit > 0 && a.totalMem+r.allocSize > a.limit {
		return 0, nil
	}
	if r.expActive {
		return a.allocExpandable(r)
	}
	addr, err := a.dev.Malloc(r.allocSize)
	if err != nil {
		if errors.Is(err, ErrDeviceOOM) {
			return 0, nil
		}
		return 0, fmt.Errorf("allocator: cudaMalloc(%d): %w", r.allocSize, err)
	}
	id := a.newBlock(addr, r.allocSize, r.stream, r.pool)
	a.totalMem += r.allocSize
	st := a.statTypes(r.pool)
	a.stats.Segment.inc(st, 1)
	a.stats.ReservedBytes.inc(st, r.allocSize)
	if r.allocSize >= a.conf.MaxSplitSize {
		a.stats.OversizeSegments.inc(1)
	}
	a.stats.NumDeviceAlloc++
	if pp := r.pool.owner; pp != nil {
		pp.mallocCount++
	}
	a.emit(ActSegmentAlloc, addr, r.allocSize, r.stream, r.pool, 0)
	return id, nil
}

// releaseBlock is release_block: cudaFree a whole free non-expandable segment.
func (a *Allocator) releaseBlock(id blockID) {
	b := &a.blocks[id]
	pool := a.pools[b.pool]
	a.emit(ActSegmentFree, b.addr, b.size, b.stream, pool, 0)
	if err := a.dev.Free(b.addr); err != nil {
		panic(fmt.Sprintf("invariant violation: cudaFree(%#x): %v", b.addr, err))
	}
	a.totalMem -= b.size
	if pool.owner != nil {
		pool.owner.mallocCount--
	}
	st := a.statTypes(pool)
	a.stats.Segment.dec(st, 1)
	a.stats.ReservedBytes.dec(st, b.size)
	if b.size >= a.conf.MaxSplitSize {
		a.stats.OversizeSegments.dec(1)
	}
	a.stats.NumDeviceFree++
	pool.blocks.Delete(a.key(id))
	a.deleteBlock(id)
}

// releasable reports whether releaseAvailable may cudaFree free oversize
// block id: it is not in an expandable segment, and it is a whole segment.
// PyTorch checks only the first: under max_split_size no oversize block is
// ever split, so a free one is always a whole segment. A state restored
// from a recording made without the setting (a wrapped trace replayed with
// --conf max_split_size_mb) can hold split oversize blocks, which PyTorch
// never would; releasing one would free memory that live blocks share, so
// they are left alone, which changes nothing in any state PyTorch reaches.
func (a *Allocator) releasable(id blockID) bool {
	b := &a.blocks[id]
	return b.exp == 0 && !b.isSplit()
}

// releaseAvailable is release_available_cached_blocks (§7.2), the first OOM
// fallback; it does nothing unless max_split_size_mb is set.
func (a *Allocator) releaseAvailable(r *request) bool {
	m := a.conf.MaxSplitSize
	if m == Unlimited {
		return false
	}
	p := r.pool
	key := freeKey{stream: r.stream, size: max(r.size, m)}
	var first freeKey
	found := false
	p.blocks.AscendGreaterOrEqual(key, func(k freeKey) bool { first, found = k, true; return false })
	if found && first.stream == r.stream && a.releasable(first.id) {
		a.releaseBlock(first.id)
		return true
	}
	// Walk down from the largest block below the key.
	var victims []blockID
	var total int64
	p.blocks.DescendLessOrEqual(freeKey{stream: key.stream, size: key.size - 1, addr: ^uint64(0)}, func(k freeKey) bool {
		if total >= key.size || k.size < m || k.stream != r.stream {
			return false
		}
		if a.releasable(k.id) {
			victims = append(victims, k.id)
			total += k.size
		}
		return true
	})
	for _, id := range victims {
		a.releaseBlock(id)
	}
	return total >= key.size
}

// releaseCached is release_cached_blocks (§7.3): the full flush of
// empty_cache and of the last OOM fallback.
func (a *Allocator) releaseCached(id PoolID) error {
	if id.IsDefault() && len(a.captures) == 0 {
		a.syncAndFreeEvents()
		if err := a.releaseBlocks(a.large); err != nil {
			return err
		}
		if err := a.releaseBlocks(a.small); err != nil {
			return err
		}
	}
	for _, pid := range a.sortedFreeable(id) {
		pp := a.freeable[pid]
		if !id.IsDefault() {
			a.syncPoolEvents(pp)
		}
		for _, p := range pp.blockPools() {
			if err := a.releaseBlocks(p); err != nil {
				return err
			}
		}
		if pp.mallocCount == 0 && !a.hasExpandable(pp) {
			delete(a.private, pid)
			delete(a.freeable, pid)
			for _, p := range pp.blockPools() {
				p.owner = nil
				a.deadPools = append(a.deadPools, p.idx)
			}
			a.deadPrivates = append(a.deadPrivates, pp)
		}
	}
	return nil
}

// syncPoolEvents is synchronize_and_free_events for one private pool, as
// the empty_cache of that pool alone (a MemPool's destruction) runs it: it
// counts in num_sync_all_streams and frees the pool's pending blocks, in
// free order, leaving the others pending (and those completed still to
// process).
func (a *Allocator) syncPoolEvents(pp *privatePool) {
	a.stats.NumSyncAllStreams++
	var freed []blockID
	for i, id := range a.pending {
		if id == 0 || a.pools[a.blocks[id].pool].owner != pp {
			continue
		}
		freed = append(freed, id)
		a.pending[i] = 0
		a.pendDead++
	}
	if len(freed) == 0 {
		return
	}
	done := a.doneIDs[:0]
	for _, id := range a.doneIDs[:a.done] {
		if a.pools[a.blocks[id].pool].owner != pp {
			done = append(done, id)
		}
	}
	a.doneIDs, a.done = done, len(done)
	a.compactPending()
	for _, id := range freed {
		a.blocks[id].events = 0
		a.freeBlock(id)
	}
}

// releaseBlocks is release_blocks: cudaFree every unsplit free segment of the
// pool in (stream, size, address) order, then unmap the free expandable blocks.
func (a *Allocator) releaseBlocks(p *blockPool) error {
	whole, exp := a.releaseLists()
	p.blocks.Ascend(func(k freeKey) bool {
		b := &a.blocks[k.id]
		if b.exp != 0 {
			exp = append(exp, k.id)
		} else if !b.isSplit() {
			whole = append(whole, k.id)
		}
		return true
	})
	a.keepReleaseLists(whole, exp) // nothing below calls releaseBlocks
	for _, id := range whole {
		a.releaseBlock(id)
	}
	for _, id := range exp {
		if err := a.unmapBlock(id); err != nil {
			return err
		}
	}
	return nil
}

// EmptyCache is torch.cuda.empty_cache(): a full flush of the default pools
// and of freeable private pools (§7.3).
func (a *Allocator) EmptyCache() error { return a.releaseCached(PoolID{}) }

// EmptyPoolCache is empty_cache for one private pool (the mempool variant).
func (a *Allocator) EmptyPoolCache(id PoolID) error { return a.releaseCached(id) }

// CountSync counts one synchronize_and_free_events in num_sync_all_streams
// and does nothing else: what an EmptyCache does when WouldEmpty is false,
// for a replay that learns of such a call only after later events changed
// what it would release.
func (a *Allocator) CountSync() { a.stats.NumSyncAllStreams++ }

// DeviceCalls returns num_device_alloc and num_device_free: the segments
// (or expandable mappings) made and released so far.
func (a *Allocator) DeviceCalls() (mallocs, frees int64) {
	return a.stats.NumDeviceAlloc, a.stats.NumDeviceFree
}

// WouldEmpty reports whether EmptyCache would do more than count in
// num_sync_all_streams: complete a pending free, cudaFree a segment or
// unmap a page. Such a call leaves events in a recording; one that does
// none of these leaves nothing, which is how a replay that infers an
// empty_cache() call no release shows checks that the recording allows it.
func (a *Allocator) WouldEmpty() bool {
	if len(a.pending) > a.pendDead {
		return true
	}
	pools := []*blockPool{}
	if len(a.captures) == 0 {
		pools = append(pools, a.large, a.small)
	}
	for _, pid := range a.sortedFreeable(PoolID{}) {
		pools = append(pools, a.freeable[pid].blockPools()...)
	}
	found := false
	for _, p := range pools {
		p.blocks.Ascend(func(k freeKey) bool {
			b := &a.blocks[k.id]
			if b.exp == 0 {
				found = !b.isSplit()
			} else {
				e := a.expTab[b.exp]
				off := int64(b.addr - e.base)
				found = (off+e.page-1)/e.page < (off+b.size)/e.page
			}
			return !found
		})
		if found {
			return true
		}
	}
	return false
}
