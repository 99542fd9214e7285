package allocator

import (
	"fmt"
	"slices"
)

// Free releases the block at addr as DeviceCachingAllocator::free (§8). If
// record_stream marked other streams as users, the block becomes pending
// (active_pending_free) until CompleteFree or a flush; otherwise it returns to
// the cache at once (free_requested then free_completed).
func (a *Allocator) Free(addr uint64) error {
	a.index()
	slot := a.active.Find(addr)
	var id blockID
	if slot >= 0 {
		id = *a.active.At(slot)
	}
	ok := id != 0
	if !ok || !a.blocks[id].allocated {
		return fmt.Errorf("allocator: free of %#x: no allocated block there", addr)
	}
	a.free(id, slot)
	return nil
}

// FreeHandle is Free of the block at addr, which MallocHandle returned with
// h. When h still names the allocated block at addr, no address lookup is
// needed; otherwise (the block was freed since, or h is stale) it is
// exactly Free(addr).
//
// Its common case, a block that no other stream used freed with no
// observer, is free's, written out: freeBlockIn is then its only call.
func (a *Allocator) FreeHandle(addr uint64, h Handle) error {
	b := a.handleBlock(addr, h)
	if b == nil {
		return a.Free(addr)
	}
	id := blockID(h)
	if b.used || a.observed {
		a.free(id, -1)
		return nil
	}
	pool := a.pools[b.pool]
	st := a.statTypes(pool)
	b.allocated = false
	if !a.noBlockStats {
		a.stats.Allocation.down(st, 1)
		a.stats.AllocatedBytes.down(st, b.size)
		if b.size >= a.conf.MaxSplitSize {
			a.stats.OversizeAllocations.dec(1)
		}
	}
	a.freeBlockIn(id, -1, pool, st, ActFreeCompleted)
	return nil
}

// FreeAllocated is FreeHandle of the allocated block at addr that h
// names, returning its size (before the free merges it), for the replay
// that annotates the size of each block it frees: the look at h and the
// size in the call that frees it. It reports false, having changed
// nothing, where h names no allocated block at addr (HandleSize and
// FreeHandle then answer). It is FreeHandle's common case written out
// again, not shared: a call FreeHandle made to it would cost every other
// replay's frees.
func (a *Allocator) FreeAllocated(addr uint64, h Handle) (int64, bool) {
	b := a.handleBlock(addr, h)
	if b == nil {
		return 0, false
	}
	id, size := blockID(h), b.size
	if b.used || a.observed {
		a.free(id, -1)
		return size, true
	}
	pool := a.pools[b.pool]
	st := a.statTypes(pool)
	b.allocated = false
	if !a.noBlockStats {
		a.stats.Allocation.down(st, 1)
		a.stats.AllocatedBytes.down(st, b.size)
		if b.size >= a.conf.MaxSplitSize {
			a.stats.OversizeAllocations.dec(1)
		}
	}
	a.freeBlockIn(id, -1, pool, st, ActFreeCompleted)
	return size, true
}

// FreeHandlePending is FreeHandle, then Pending(addr): it also reports
// whether the block freed waits for the events of other streams that used
// it. Where FreeHandle needs no address lookup, neither does it.
func (a *Allocator) FreeHandlePending(addr uint64, h Handle) (bool, error) {
	id := a.handleAt(addr, h)
	if err := a.FreeHandle(addr, h); err != nil {
		return false, err
	}
	if id == 0 {
		return a.Pending(addr), nil // FreeHandle looked addr up
	}
	// The block h named is at addr still if it waits; freed to the cache,
	// it leaves no active block there.
	b := &a.blocks[id]
	return b.live && b.addr == addr && b.events > 0, nil
}

// free is Free of the allocated block id, found at slot of the active map
// (-1: unknown or not indexed).
func (a *Allocator) free(id blockID, slot int) {
	b := &a.blocks[id]
	pool := a.pools[b.pool]
	st := a.statTypes(pool)
	b.allocated = false
	if b.used && !a.activeApart {
		// This block will be pending: active but not allocated.
		a.separateActive()
	}
	a.stats.Allocation.down(st, 1)
	a.stats.AllocatedBytes.down(st, b.size)
	// done is what freeBlockIn reports, below.
	done := ActFreeCompleted
	if a.observed { // emit, inline for a sink (sinkFits)
		if !b.used && a.obs == nil {
			// A sink takes a synchronous free as one event, which
			// freeBlockIn writes (ActFreeSync).
			done = ActFreeSync
		} else if a.sinkFits() {
			a.sinkPut(ActFreeRequested, b, b.requested)
		} else {
			a.emitSlow(ActFreeRequested, b.addr, b.requested, b.stream, pool, b.size)
		}
	}
	if b.size >= a.conf.MaxSplitSize {
		a.stats.OversizeAllocations.dec(1)
	}
	if b.used {
		// insert_events: one event per recorded stream. Captures defer the
		// events; the model treats both alike.
		b.events += a.uses.take(id)
		b.used = false
		a.setPendAt(id, len(a.pending))
		a.pending = append(a.pending, id)
		return
	}
	a.freeBlockIn(id, slot, pool, st, done)
}

// RecordStream is recordStream (§8): the block at addr is also used by
// stream, so its free waits for that stream's work.
func (a *Allocator) RecordStream(addr uint64, stream uint64) error {
	id := a.activeID(addr)
	ok := id != 0
	if !ok || !a.blocks[id].allocated {
		return fmt.Errorf("allocator: record_stream of %#x: no allocated block there", addr)
	}
	a.recordStream(id, stream)
	return nil
}

// RecordStreamHandle is RecordStream of the block at addr, which
// MallocHandle returned with h (see FreeHandle).
func (a *Allocator) RecordStreamHandle(addr uint64, h Handle, stream uint64) error {
	if id := a.handleAt(addr, h); id != 0 {
		a.recordStream(id, stream)
		return nil
	}
	return a.RecordStream(addr, stream)
}

func (a *Allocator) recordStream(id blockID, stream uint64) {
	b := &a.blocks[id]
	if stream != b.stream && a.uses.add(id, stream) {
		b.used = true
	}
}

// Pending reports whether the block at addr awaits its cross-stream events
// (events marked done but not yet processed count as no longer awaited).
func (a *Allocator) Pending(addr uint64) bool {
	id := a.activeID(addr)
	ok := id != 0
	return ok && a.blocks[id].events > 0
}

// PendingHandle is Pending of the block at addr, which MallocHandle
// returned with h (see FreeHandle).
func (a *Allocator) PendingHandle(addr uint64, h Handle) bool {
	if id := a.activeAt(addr, h); id != 0 {
		return a.blocks[id].events > 0
	}
	return a.Pending(addr)
}

// CompleteFree completes every outstanding event of the pending block at addr
// and returns it to the cache (free_completed), as process_events does when
// the events have finished. It is how a replay places a recorded
// free_completed.
func (a *Allocator) CompleteFree(addr uint64) error {
	id := a.activeID(addr)
	ok := id != 0
	if !ok || a.blocks[id].events == 0 {
		return fmt.Errorf("allocator: complete free of %#x: no pending block there", addr)
	}
	a.MarkEventsDone(addr)
	a.ProcessEvents()
	return nil
}

// CompleteFreeHandle is CompleteFree of the block at addr, which
// MallocHandle returned with h (see FreeHandle).
func (a *Allocator) CompleteFreeHandle(addr uint64, h Handle) error {
	id := a.activeAt(addr, h)
	if id == 0 {
		return a.CompleteFree(addr)
	}
	if a.blocks[id].events == 0 {
		return fmt.Errorf("allocator: complete free of %#x: no pending block there", addr)
	}
	a.markDone(id)
	a.ProcessEvents()
	return nil
}

// MarkEventsDone completes the outstanding events of the pending block at
// addr without freeing it; the next ProcessEvents (the start of the next
// Malloc) does.
func (a *Allocator) MarkEventsDone(addr uint64) {
	if id := a.activeID(addr); id != 0 {
		a.markDone(id)
	}
}

// MarkEventsDoneHandle is MarkEventsDone of the block at addr, which
// MallocHandle returned with h (see FreeHandle).
func (a *Allocator) MarkEventsDoneHandle(addr uint64, h Handle) {
	if id := a.activeAt(addr, h); id != 0 {
		a.markDone(id)
		return
	}
	a.MarkEventsDone(addr)
}

func (a *Allocator) markDone(id blockID) {
	if a.blocks[id].events > 0 {
		a.blocks[id].events = -a.blocks[id].events // negative: completed, not yet processed
		a.doneIDs = append(a.doneIDs[:a.done], id)
		a.done++
	}
}

// ProcessEvents is process_events (§8): pending blocks whose events have
// completed are freed, in the order they were freed. It costs O(k log k)
// for the k blocks completed since its last call, not a pass over every
// pending block: their places in pending, sorted, give that order.
func (a *Allocator) ProcessEvents() {
	if a.done == 0 {
		return
	}
	ids := a.doneIDs[:a.done]
	a.done = 0
	addPendWork(len(ids))
	pos := a.pendPos[:0]
	for _, id := range ids {
		pos = append(pos, a.pendIndex(id))
	}
	slices.Sort(pos)
	for j, i := range pos {
		ids[j] = a.pending[i]
		a.pending[i] = 0
	}
	a.pendDead += len(pos)
	a.pendPos = pos[:0]
	a.compactPending()
	for _, id := range ids {
		a.blocks[id].events = 0
		a.freeBlock(id)
	}
	a.doneIDs = ids[:0]
}

// pendWork counts the places of pending that ProcessEvents reads, for the
// test that bounds its work.
var pendWork int

func addPendWork(n int) {
	if countWork {
		pendWork += n
	}
}

// pendIndex is the place of the pending block id in pending. An entry of
// pendAt that pending does not agree with (a block that Restore made
// pending, or one of a run before a Reset) makes it index them all again.
// The result is a place where pending holds id, or not (id not pending).
func (a *Allocator) pendIndex(id blockID) int32 {
	if int(id) < len(a.pendAt) {
		if i := a.pendAt[id]; int(i) < len(a.pending) && a.pending[i] == id {
			return i
		}
	}
	for i, x := range a.pending {
		if x != 0 {
			a.setPendAt(x, i)
		}
	}
	addPendWork(len(a.pending))
	if int(id) < len(a.pendAt) {
		return a.pendAt[id]
	}
	return 0
}

// compactPending drops the 0s of processed blocks from pending once they
// are half of it: amortised O(1) a block.
func (a *Allocator) compactPending() {
	if a.pendDead == len(a.pending) {
		a.pending, a.pendDead = a.pending[:0], 0
		return
	}
	if a.pendDead < 16 || 2*a.pendDead < len(a.pending) {
		return
	}
	out := a.pending[:0]
	addPendWork(len(a.pending))
	for _, id := range a.pending {
		if id != 0 {
			a.setPendAt(id, len(out))
			out = append(out, id)
		}
	}
	clear(a.pending[len(out):])
	a.pending, a.pendDead = out, 0
}

// CompleteLate says that the events of the pending block at addr, which
// MallocHandle returned with h, complete while the next malloc runs: its
// search for a cached block does not see the block, which is freed right
// after the search (or by a synchronize before it, CompleteLate's blocks
// first, in the order given). A recording shows the completions that a
// malloc's retry waited for (release_cached_blocks synchronizes, §7.3)
// before the malloc's own events; a replay that completed them where they
// lie would let the search find blocks PyTorch's did not.
func (a *Allocator) CompleteLate(addr uint64, h Handle) error {
	id := a.activeAt(addr, h)
	if id == 0 {
		id = a.activeID(addr)
	}
	if id == 0 || a.blocks[id].events <= 0 {
		return fmt.Errorf("allocator: complete free of %#x: no pending block there", addr)
	}
	a.late = append(a.late, lateBlock{id, addr})
	return nil
}

// FreeLate frees the blocks of CompleteLate that no malloc has freed yet.
func (a *Allocator) FreeLate() {
	if len(a.late) > 0 {
		a.freeLate()
	}
}

// freeLate frees the blocks of CompleteLate still pending, in order.
func (a *Allocator) freeLate() {
	for _, l := range a.late {
		id, b := l.id, &a.blocks[l.id]
		if !b.live || b.events <= 0 || b.addr != l.addr {
			continue // freed already (a synchronize, CompleteFree)
		}
		if i := a.pendIndex(id); int(i) < len(a.pending) && a.pending[i] == id {
			a.pending[i] = 0
			a.pendDead++
		}
		b.events = 0
		a.freeBlock(id)
	}
	a.late = a.late[:0]
	a.compactPending()
}

// syncAndFreeEvents is synchronize_and_free_events: wait for every
// outstanding event and free the pending blocks (CompleteLate's first, in
// their order; the rest in free order: PyTorch walks a hash map of streams,
// whose order a model cannot know).
func (a *Allocator) syncAndFreeEvents() {
	a.stats.NumSyncAllStreams++
	if len(a.late) > 0 {
		a.freeLate()
	}
	p := a.pending
	a.pending = nil
	a.done, a.pendDead = 0, 0
	for _, id := range p {
		if id == 0 {
			continue
		}
		a.blocks[id].events = 0
		a.freeBlock(id)
	}
}

// freeBlock is free_block (§8): merge with free neighbours and return the
// block to its pool.
func (a *Allocator) freeBlock(id blockID) {
	pool := a.pools[a.blocks[id].pool]
	a.freeBlockIn(id, -1, pool, a.statTypes(pool), ActFreeCompleted)
}

// freeBlockIn is freeBlock for a block of pool (whose stat types are st)
// that an address lookup found at slot of the active map (-1: unknown),
// reporting act: ActFreeCompleted, or ActFreeSync to a sink for a
// synchronous free (free). free passes the pool and types it has looked up
// already.
func (a *Allocator) freeBlockIn(id blockID, slot int, pool *blockPool, st statTypes, act Action) {
	b := &a.blocks[id]
	if a.observed { // emit, inline for a sink (sinkFits)
		if a.sinkFits() {
			a.sinkPut(act, b, b.requested)
		} else {
			a.emitSlow(act, b.addr, b.requested, b.stream, pool, b.size)
		}
	}
	if a.indexed {
		a.active.DeleteAt(b.addr, slot)
		b = &a.blocks[id]
	}
	// Merge the free neighbours (mergeable, merge), keeping the keys they
	// leave the free set with: the set's updates come last, after the
	// statistics, so that little is live across their calls.
	var netCount, netBytes int64
	var delPrev, delNext freeKey
	if p := b.prev; a.mergeable(id, p) {
		netCount--
		if s := &a.blocks[p]; s.mapped && s.pool == b.pool {
			delPrev = freeKey{stream: s.stream, size: s.size, addr: s.addr, id: p}
			b.addr, b.prev = s.addr, s.prev
			if s.prev != 0 {
				a.blocks[s.prev].next = id
			}
			b.size += s.size
			netBytes -= s.size
			a.deleteBlock(p)
		} else {
			netBytes -= a.merge(id, p)
		}
		b = &a.blocks[id]
	}
	if n := b.next; a.mergeable(id, n) {
		netCount--
		if s := &a.blocks[n]; s.mapped && s.pool == b.pool {
			delNext = freeKey{stream: s.stream, size: s.size, addr: s.addr, id: n}
			b.next = s.next
			if s.next != 0 {
				a.blocks[s.next].prev = id
			}
			b.size += s.size
			netBytes -= s.size
			a.deleteBlock(n)
		} else {
			netBytes -= a.merge(id, n)
		}
		b = &a.blocks[id]
	}
	if !a.noBlockStats {
		// The block's size before the merges, which took -netBytes.
		origSize := b.size + netBytes
		if b.isSplit() {
			netCount++
			netBytes += b.size
		}
		if b.exp == 0 {
			if netCount > 0 {
				a.stats.InactiveSplit.inc(st, netCount)
			} else if netCount < 0 {
				a.stats.InactiveSplit.dec(st, -netCount)
			}
			if netBytes > 0 {
				a.stats.InactiveSplitBytes.inc(st, netBytes)
			} else if netBytes < 0 {
				a.stats.InactiveSplitBytes.dec(st, -netBytes)
			}
		}
		if a.activeApart {
			a.stats.Active.down(st, 1)
			a.stats.ActiveBytes.down(st, origSize)
		}
		a.stats.RequestedBytes.down(st, b.requested)
	}
	b.gcBase = pool.gcClock
	ins := freeKey{stream: b.stream, size: b.size, addr: b.addr, id: id}
	if delPrev.id|delNext.id == 0 {
		// Nothing merged (the commonest free, a hole between allocated
		// blocks): no pending member or class entry leaves the set.
		pool.blocks.ReplaceOrInsert(ins)
		return
	}
	if pe := pool.blocks.pendOf(delPrev.id, delNext.id); pe != nil {
		// The block merged a pending member: the merge is pending. The
		// other neighbour may be in a class or the other pending member.
		if delPrev.id != 0 && delPrev.id != pe.id {
			pool.blocks.Delete(delPrev)
		}
		if delNext.id != 0 && delNext.id != pe.id {
			pool.blocks.Delete(delNext)
		}
		*pe = ins
		return
	}
	if delPrev.id != 0 {
		pool.blocks.Delete(delPrev)
	}
	if delNext.id != 0 {
		pool.blocks.Delete(delNext)
	}
	pool.blocks.ReplaceOrInsert(ins)
}

// tryMerge is try_merge_blocks: absorb src into dst if src is free, has no
// events and the same mapped state. It returns the absorbed size (0 if none).
func (a *Allocator) tryMerge(dst, src blockID) int64 {
	if !a.mergeable(dst, src) {
		return 0
	}
	return a.merge(dst, src)
}

// mergeable is tryMerge's test, inlined where a free merges its neighbours.
func (a *Allocator) mergeable(dst, src blockID) bool {
	if src == 0 {
		return false
	}
	s := &a.blocks[src]
	return !s.allocated && s.events == 0 && !s.used && s.mapped == a.blocks[dst].mapped
}

// merge is tryMerge once the test has passed.
func (a *Allocator) merge(dst, src blockID) int64 {
	s, d := &a.blocks[src], &a.blocks[dst]
	if s.mapped {
		a.pools[s.pool].blocks.Delete(a.key(src))
	} else {
		a.pools[s.pool].unmapped.Delete(a.ukey(src))
	}
	if d.prev == src {
		d.addr = s.addr
		d.prev = s.prev
		if d.prev != 0 {
			a.blocks[d.prev].next = dst
		}
	} else {
		d.next = s.next
		if d.next != 0 {
			a.blocks[d.next].prev = dst
		}
	}
	size := s.size
	d.size += size
	a.deleteBlock(src)
	return size
}
