package allocator

import (
	"errors"
	"fmt"

	"github.com/tracer-dev/tracer/internal/grow"
)

// request is AllocParams: one malloc's rounded size, pool and segment size.
type request struct {
	orig      int64
	size      int64
	allocSize int64
	stream    uint64
	pool      *blockPool
	expActive bool
}

// Malloc allocates size bytes on stream as DeviceCachingAllocator::malloc
// (§4) and returns the block's address. A 0-byte request returns 0 and
// touches nothing. On out of memory the error wraps ErrOOM (an *OOMError);
// a Device failure other than out of memory is returned wrapped.
func (a *Allocator) Malloc(size int64, stream uint64) (uint64, error) {
	addr, _, err := a.MallocHandle(size, stream)
	return addr, err
}

// MallocHandle is Malloc that also returns a Handle of the block, with which
// FreeHandle frees it without an address lookup. A 0-byte request returns
// address 0 and the zero Handle.
//
// Its common case is written out here, get_free_block and
// alloc_found_block in one straight line with mallocSlow's effects in
// mallocSlow's order: a request of the default pools with no completed
// events or late frees to process, on the stream found last, whose best
// fit is the pool's pending member (pend.go) or the smallest entry of the
// request's class or of the next non-empty one (under
// expandable_segments, where the scan from there stops), below
// max_split_size. Anything else goes to mallocSlow before anything has changed, which
// starts over. The free set's updates come last, so that little is live
// across their calls.
func (a *Allocator) MallocHandle(size int64, stream uint64) (uint64, Handle, error) {
	if uint64(size-1) >= 1<<60-1 || len(a.captures) != 0 || a.done != 0 || len(a.late) != 0 {
		return a.mallocSlow(size, stream)
	}
	rs := a.roundSize(size)
	p, st := a.large, statTypes(1)
	small := rs <= a.conf.SmallSize
	if small {
		p, st = a.small, 0
	}
	sb := p.blocks.lastB
	if sb == nil || p.blocks.lastSt != stream {
		return a.mallocSlow(size, stream)
	}
	if pe := &p.blocks.pend[0]; pe.size >= rs {
		if addr, id, ok := a.splitPend(size, rs, small, p, sb); ok {
			return addr, id, nil
		}
	}
	ci := sizeClass(rs)
	h := sb.look(ci)
	if h.id == 0 {
		if ci = sb.next(ci + 1); ci < 0 {
			if p.blocks.pend[2].size >= rs { // under expandable_segments only
				if addr, id, ok := a.splitTail(size, rs, small, p); ok {
					return addr, id, nil
				}
			}
			h = &topBin // none in the classes; pend may fit
		} else {
			h = sb.binAt(ci)
		}
	} else if h.size < rs {
		return a.mallocSlow(size, stream)
	}
	// The best fit is the classes' lower bound or a pending member (on
	// this stream, the last found; size 0 if none), if one fits and
	// comes before it. Block 0, no block, is not expandable.
	ps := &p.blocks.pend
	id, fs, fa, ii := h.id, h.size, h.addr, 0
	if pe := &ps[0]; pe.size >= rs && (pe.size < fs || pe.size == fs && pe.addr < fa) {
		id, fs, fa = pe.id, pe.size, pe.addr
	}
	if pe := &ps[1]; pe.size >= rs && (pe.size < fs || pe.size == fs && pe.addr < fa) {
		id, fs, fa = pe.id, pe.size, pe.addr
	}
	// pend[2] is set only under expandable_segments, and so only once
	// there is an expandable segment. An expandable best fit takes
	// mallocSlow without expandable_segments (a restored one), and under
	// it starts the scan, which moves only from a block with unmapped
	// memory after it (expandableScan). Block 0, no block, is not
	// expandable.
	if len(a.expTab) != 0 {
		if pe := &ps[2]; pe.size >= rs && (pe.size < fs || pe.size == fs && pe.addr < fa) {
			id, fs = pe.id, pe.size
		}
		if b := &a.blocks[id]; b.exp != 0 {
			if !a.conf.ExpandableSegments {
				return a.mallocSlow(size, stream)
			}
			if b.next != 0 && !a.blocks[b.next].mapped {
				c, i, ok := a.scanFast(sb, h, ci, &p.blocks, rs, id)
				if !ok {
					return a.mallocSlow(size, stream)
				}
				if c >= 0 {
					ci, ii = c, i
					h = sb.binAt(ci)
					e := h.at(ii)
					id, fs = e.id, e.size
				}
			}
		}
	}
	if id == 0 {
		return a.mallocSlow(size, stream)
	}
	bs := fs
	if bs >= a.conf.MaxSplitSize {
		return a.mallocSlow(size, stream)
	}
	// should_split, below max_split_size (as bs is).
	rem := bs - rs
	split := rem >= a.conf.MinBlockSize
	if !small && !a.conf.ExpandableSegments {
		split = rem > a.conf.SmallSize
	}
	// The split's block slot (takeSlot), the arena grown here if need be:
	// mallocSlow would put pend into its class, so whether the arena has
	// room (a reused allocator's has more) must not decide the path.
	rid := id
	if split {
		if n := len(a.freeIDs); n > 0 {
			id = a.freeIDs[n-1]
			a.freeIDs = a.freeIDs[:n-1]
		} else {
			n := len(a.blocks)
			if n == cap(a.blocks) {
				a.growBlocks()
			}
			a.blocks = a.blocks[:n+1]
			id = blockID(n)
		}
	}
	if a.gcEnabled() {
		p.gcClock++
	}
	b := &a.blocks[rid]
	alreadySplit := b.isSplit()
	notExp := b.exp == 0
	if split {
		rb := b
		b = &a.blocks[id]
		b.addr, b.size, b.stream, b.requested, b.gcBase = rb.addr, rs, rb.stream, size, 0
		b.prev, b.next, b.pool, b.exp, b.events = rb.prev, rid, rb.pool, rb.exp, 0
		b.allocated, b.mapped, b.live, b.used = true, true, true, false
		if rb.prev != 0 {
			a.blocks[rb.prev].next = id
		}
		rb.prev = id
		rb.addr += uint64(rs)
		rb.size = rem
		rb.gcBase = p.gcClock
		if notExp {
			if alreadySplit {
				a.stats.InactiveSplitBytes.dec(st, rs)
			} else {
				a.stats.InactiveSplit.inc(st, 1)
				a.stats.InactiveSplitBytes.inc(st, rem)
			}
		}
	} else {
		if alreadySplit && notExp {
			a.stats.InactiveSplit.dec(st, 1)
			a.stats.InactiveSplitBytes.dec(st, bs)
		}
		b.allocated = true
		b.requested = size
	}
	if !a.noBlockStats {
		a.stats.Allocation.up(st, 1)
		a.stats.AllocatedBytes.up(st, b.size)
		if a.activeApart {
			a.stats.Active.up(st, 1)
			a.stats.ActiveBytes.up(st, b.size)
		}
		a.stats.RequestedBytes.up(st, size)
	}
	addr := b.addr
	switch {
	case rid == h.id: // the smallest entry of its class
		if h.nrest == 0 {
			p.blocks.emptyClass(sb, ci, h)
		} else {
			p.blocks.takeHead(h)
		}
	case ii != 0:
		p.blocks.deleteAt(sb, ci, h, ii)
	default: // the best fit was pending
		pe := &p.blocks.pend[0]
		if rid == p.blocks.pend[1].id {
			pe = &p.blocks.pend[1]
		} else if rid == p.blocks.pend[2].id {
			pe = &p.blocks.pend[2]
		}
		pe.taken(split, rem, addr+uint64(rs))
		split = false
	}
	if split {
		k := freeKey{stream: stream, size: rem, addr: addr + uint64(rs), id: rid}
		if a.conf.ExpandableSegments && a.isTail(rid) {
			p.blocks.setTail(k) // the segment's mapped end, which most of its mallocs split
		} else {
			p.blocks.setPend(k)
		}
	}
	if a.indexed || a.observed {
		a.allocNoted(id, size, p)
	}
	return addr, Handle(id), nil
}

// growBlocks doubles the block arena's capacity, out of MallocHandle's
// line.
//
//go:noinline
func (a *Allocator) growBlocks() { a.blocks = grow.Double(a.blocks, 0) }

// allocNoted is the end of allocFound for MallocHandle's common case: the
// block id enters the address index, and the event is reported.
func (a *Allocator) allocNoted(id blockID, size int64, p *blockPool) {
	b := &a.blocks[id]
	if a.indexed {
		a.active.Put(b.addr, id)
		b = &a.blocks[id]
	}
	if a.observed {
		if a.sinkFits() {
			a.sinkPut(ActAlloc, b, size)
		} else {
			a.emitSlow(ActAlloc, b.addr, size, b.stream, p, b.size)
		}
	}
}

// mallocSlow is MallocHandle past its common case.
func (a *Allocator) mallocSlow(size int64, stream uint64) (uint64, Handle, error) {
	if size <= 0 {
		return 0, 0, nil
	}
	if size >= 1<<60 {
		return 0, 0, &OOMError{Size: size, msg: "CUDA out of memory. Tried to allocate more than 1EB memory."}
	}
	if len(a.captures) == 0 && a.done != 0 {
		a.ProcessEvents()
	}
	r := request{orig: size, stream: stream}
	r.size = a.roundSize(size)
	r.pool = a.getPool(r.size, stream)
	r.expActive = a.conf.ExpandableSegments

	// getFreeBlock, its dispatch written out: a call less per malloc.
	if a.gcEnabled() {
		r.pool.gcClock++
	}
	var id blockID
	if r.expActive {
		id = a.findFree(&r)
	} else {
		id = a.bestFit(&r)
	}
	if id == 0 {
		if len(a.late) > 0 {
			a.freeLate()
		}
		// Only a new segment needs the segment size (a division for large
		// requests); most mallocs are served from the cache.
		r.allocSize = a.conf.allocationSize(r.size)
		if a.gcEnabled() {
			a.garbageCollect()
		}
		var err error
		if id, err = a.allocBlock(&r, false); err != nil {
			return 0, 0, err
		}
		if id == 0 && a.releaseAvailable(&r) {
			if id, err = a.allocBlock(&r, false); err != nil {
				return 0, 0, err
			}
		}
		if id == 0 && len(a.captures) == 0 {
			if err := a.releaseCached(PoolID{}); err != nil {
				return 0, 0, err
			}
			if id, err = a.allocBlock(&r, true); err != nil {
				return 0, 0, err
			}
		}
	}
	if id == 0 {
		return 0, 0, a.oom(&r)
	}
	addr, id := a.allocFound(id, &r)
	if len(a.late) > 0 {
		a.freeLate() // after the block found has left the free blocks' neighbours
	}
	return addr, Handle(id), nil
}

// getFreeBlock is get_free_block (§5): best fit on the request's stream with
// the expandable adjustments and oversize rules. It removes and returns the
// block, or 0. mallocSlow writes it out.
func (a *Allocator) getFreeBlock(r *request) blockID {
	if a.gcEnabled() {
		r.pool.gcClock++
	}
	if r.expActive {
		return a.findFree(r)
	}
	return a.bestFit(r)
}

// bestFit is getFreeBlock (past its clock) outside expandable_segments. Its
// common case is written out with no call that returns into it (so that it
// spills nothing): the stream found last, the best fit the smallest entry
// of the request's class or of the next non-empty one, not expandable.
// Anything else is findFree's, which starts over. Under
// expandable_segments, where nearly every block is expandable and its scan
// follows, every request goes to findFree at once.
func (a *Allocator) bestFit(r *request) blockID {
	p := r.pool
	p.blocks.flush()
	sb := p.blocks.lastB
	if sb == nil || p.blocks.lastSt != r.stream {
		return a.findFree(r)
	}
	ci := sizeClass(r.size)
	h := sb.look(ci)
	if h.id == 0 {
		if ci = sb.next(ci + 1); ci < 0 {
			return 0
		}
		h = sb.binAt(ci)
	} else if h.size < r.size {
		return a.findFree(r)
	}
	id, bs := h.id, h.size
	// No block is expandable before the first expandable segment: the
	// test of the block, a load from the arena, waits for one.
	if len(a.expTab) != 0 && a.blocks[id].exp != 0 {
		return a.findFree(r)
	}
	// The oversize rules (findFree's) need a block of max_split_size or
	// more: bs is at least r.size, so below it neither applies.
	if m := a.conf.MaxSplitSize; bs >= m && (r.size < m || bs >= r.size+a.conf.MaxNonSplitRounding) {
		return 0
	}
	if h.nrest != 0 {
		return p.blocks.takeHead(h)
	}
	p.blocks.emptyClass(sb, ci, h)
	return id
}

// findFree is getFreeBlock past its clock and bestFit's common case.
func (a *Allocator) findFree(r *request) blockID {
	p := r.pool
	p.blocks.flush()
	sb := p.blocks.stream(r.stream)
	if sb == nil {
		return 0
	}
	// lowerBound(r.size, 0), its common cases written out: the smallest
	// entry of the request's class fits, or the class is empty and the
	// answer is the smallest entry of the next non-empty class.
	// The class found (h) serves the key and the removal.
	ci, ii := sizeClass(r.size), 0
	h := sb.look(ci)
	switch {
	case h.id != 0 && h.size >= r.size:
	case h.id != 0:
		var ok bool
		if ci, ii, ok = sb.lowerBound(r.size, 0); !ok {
			return 0
		}
		h = sb.binAt(ci)
	default:
		if ci = sb.next(ci + 1); ci < 0 {
			return 0
		}
		h = sb.binAt(ci)
	}
	it := h.key(r.stream, ii)
	moved := false
	if a.blocks[it.id].exp != 0 {
		if r.expActive {
			// The scan walks the stream's entries from the position found
			// (the keys after it are its successors in the set), and the
			// block it stops at is removed at its own position.
			ci, ii = a.expandableScan(sb, h, ci, ii, it.id)
			h = sb.binAt(ci)
			it = h.key(r.stream, ii)
		} else {
			found := false
			moved = true
			p.blocks.AscendGreaterOrEqual(freeKey{stream: it.stream, size: it.size, addr: it.addr + 1}, func(k freeKey) bool {
				if k.stream != r.stream {
					return false
				}
				if a.blocks[k.id].exp == 0 {
					it, found = k, true
					return false
				}
				return true
			})
			if !found {
				return 0
			}
		}
	}
	bs := it.size
	m := a.conf.MaxSplitSize
	if r.size < m && bs >= m {
		return 0
	}
	if r.size >= m && bs >= r.size+a.conf.MaxNonSplitRounding {
		return 0
	}
	switch {
	case moved:
		p.blocks.Delete(it)
	case ii == 0 && h.nrest == 0:
		p.blocks.emptyClass(sb, ci, h) // deleteAt's case, without its test
	default:
		p.blocks.deleteAt(sb, ci, h, ii)
	}
	return it.id
}

// expSize is a block's size plus the unmapped block right after it (§5).
func (a *Allocator) expSize(id blockID) int64 {
	b := &a.blocks[id]
	s := b.size
	if b.next != 0 && !a.blocks[b.next].mapped {
		s += a.blocks[b.next].size
	}
	return s
}

// expandableScan moves from the entry at class c (h), position i (block
// cur) of the stream's bins sb to the following entries of the stream
// while their expandable size strictly decreases and the current block is
// expandable (§5), and returns the position it stops at. It keeps the
// class it is in and the current block's expandable size from one step to
// the next. A block with no unmapped memory after it ends the scan
// without a look at the next entry: that entry's size, and so its
// expandable size, is at least the block's, which is then the block's
// expandable size.
func (a *Allocator) expandableScan(sb *streamBins, h *bin, c, i int, cur blockID) (int, int) {
	n := h.len()
	curSize := a.expSize(cur)
	for b := &a.blocks[cur]; b.exp != 0 && curSize != b.size; b = &a.blocks[cur] {
		nh, nc, ni := h, c, i+1
		if ni == n {
			if nc = sb.next(c + 1); nc < 0 {
				break
			}
			nh, ni = sb.binAt(nc), 0
		}
		next := nh.at(ni).id
		nextSize := a.expSize(next)
		if nextSize >= curSize {
			break
		}
		if nh != h {
			h, n = nh, nh.len()
		}
		c, i, cur, curSize = nc, ni, next, nextSize
	}
	return c, i
}

// shouldSplit is should_split (§6) for a block of size bs.
func (a *Allocator) shouldSplit(bs int64, r *request) bool {
	rem := bs - r.size
	if r.pool.small || r.expActive {
		return rem >= a.conf.MinBlockSize
	}
	return r.size < a.conf.MaxSplitSize && rem > a.conf.SmallSize
}

// allocFound is alloc_found_block (§6) of block id, found in r's pool:
// split off the front if should_split says so, mark the block allocated
// and update the stats. It returns the allocated block's address and the
// block: mallocSlow would otherwise look the block up again after the
// call. The arena is grown first if a split could need it, so that one
// pointer to each block serves the whole call, and the split's new block
// is written once, allocated, every field of it (the slot needs no
// clearing first).
func (a *Allocator) allocFound(id blockID, r *request) (uint64, blockID) {
	if len(a.freeIDs) == 0 && len(a.blocks) == cap(a.blocks) {
		a.blocks = grow.Double(a.blocks, 0)
	}
	pool := r.pool
	b := &a.blocks[id]
	alreadySplit := b.isSplit()
	notExp := b.exp == 0
	st := a.statTypes(pool)
	if a.shouldSplit(b.size, r) {
		rem, rb := id, b
		id = a.takeSlot()
		b = &a.blocks[id]
		b.addr, b.size, b.stream, b.requested, b.gcBase = rb.addr, r.size, rb.stream, r.orig, 0
		b.prev, b.next, b.pool, b.exp, b.events = rb.prev, rem, rb.pool, rb.exp, 0
		b.allocated, b.mapped, b.live, b.used = true, true, true, false
		if rb.prev != 0 {
			a.blocks[rb.prev].next = id
		}
		rb.prev = id
		rb.addr += uint64(r.size)
		rb.size -= r.size
		pool.insert(rb, rem)
		if notExp {
			if alreadySplit {
				a.stats.InactiveSplitBytes.dec(st, r.size)
			} else {
				a.stats.InactiveSplit.inc(st, 1)
				a.stats.InactiveSplitBytes.inc(st, rb.size)
			}
		}
	} else {
		if alreadySplit && notExp {
			a.stats.InactiveSplit.dec(st, 1)
			a.stats.InactiveSplitBytes.dec(st, b.size)
		}
		b.allocated = true
		b.requested = r.orig
	}
	if a.indexed {
		a.active.Put(b.addr, id)
	}
	a.stats.Allocation.up(st, 1)
	a.stats.AllocatedBytes.up(st, b.size)
	if a.activeApart {
		a.stats.Active.up(st, 1)
		a.stats.ActiveBytes.up(st, b.size)
	}
	a.stats.RequestedBytes.up(st, r.orig)
	if b.size >= a.conf.MaxSplitSize {
		a.stats.OversizeAllocations.inc(1)
	}
	if a.observed { // emit, inline for a sink (sinkFits)
		if a.sinkFits() {
			a.sinkPut(ActAlloc, b, r.orig)
		} else {
			a.emitSlow(ActAlloc, b.addr, r.orig, b.stream, pool, b.size)
		}
	}
	return b.addr, id
}

// garbageCollect is garbage_collect_cached_blocks (§10).
func (a *Allocator) garbageCollect() {
	thr := int64(a.conf.GCThreshold * float64(a.limit))
	if a.totalMem <= thr {
		return
	}
	target := a.totalMem - thr
	var reclaimed int64
	var totalAge uint64
	count := 0
	p := a.large
	age := func(id blockID) uint64 { return p.gcClock - a.blocks[id].gcBase }
	p.blocks.Ascend(func(k freeKey) bool {
		if !a.blocks[k.id].isSplit() {
			totalAge += age(k.id)
			count++
		}
		return true
	})
	if count == 0 {
		return
	}
	freed := true
	var victims []blockID
	for reclaimed < target && freed && count > 0 {
		thrAge := float64(totalAge) / float64(count)
		freed = false
		victims = victims[:0]
		p.blocks.Ascend(func(k freeKey) bool {
			b := &a.blocks[k.id]
			if !b.isSplit() && b.exp == 0 && float64(age(k.id)) >= thrAge {
				victims = append(victims, k.id)
			}
			return true
		})
		for _, id := range victims {
			freed = true
			reclaimed += a.blocks[id].size
			totalAge -= age(id)
			count--
			a.releaseBlock(id)
		}
	}
}

// oom records the oom event and builds PyTorch's error (§12).
func (a *Allocator) oom(r *request) error {
	free, total, err := a.dev.MemInfo()
	if err != nil {
		return fmt.Errorf("allocator: memory info: %w", err)
	}
	a.emit(ActOOM, uint64(free), r.size, r.stream, r.pool, 0)
	a.stats.NumOOMs++
	if a.briefOOMs {
		return &OOMError{Size: r.orig, AllocSize: r.allocSize, DeviceFree: free,
			msg: "CUDA out of memory. Tried to allocate " + FormatSize(r.allocSize) + "."}
	}
	var priv int64
	for _, pp := range a.private {
		for _, bp := range pp.blockPools() {
			bp.blocks.Ascend(func(k freeKey) bool {
				if countWork {
					oomWork++
				}
				priv += k.size
				return true
			})
		}
	}
	a.stats.sum()
	return &OOMError{Size: r.orig, AllocSize: r.allocSize, DeviceFree: free, total: total, limit: a.limit,
		allocated: a.stats.AllocatedBytes[0].Current, private: priv, reserved: a.stats.ReservedBytes[0].Current}
}

// FormatSize is c10's format_size: bytes up to 1 KiB, then KiB/MiB/GiB with
// two decimals.
func FormatSize(n int64) string {
	switch {
	case n <= 1024:
		return fmt.Sprintf("%d bytes", n)
	case n <= 1<<20:
		return fmt.Sprintf("%.2f KiB", float64(n)/1024)
	case n <= 1<<30:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

// IsOOM reports whether err is an allocator out-of-memory error.
func IsOOM(err error) bool { return errors.Is(err, ErrOOM) }

// WouldReclaim reports whether a Malloc of size bytes on stream, issued now,
// would release cached memory before it could succeed or fail: no cached block
// fits and a new segment is refused by the memory limit or the device. The
// replayer uses it to tell an OOM-driven flush from a user's empty_cache()
// in a recording. It changes nothing.
func (a *Allocator) WouldReclaim(size int64, stream uint64) bool {
	return a.WouldRelease(size, stream, false)
}

// WouldRelease is WouldReclaim for a recorded run of releases; small says
// it freed small-pool segments, which garbage collection never releases
// (it takes only the large pool's, §10): such a run is the malloc's only if
// a new segment is refused without any release, so that the malloc goes on
// to release every cached segment.
func (a *Allocator) WouldRelease(size int64, stream uint64, small bool) bool {
	return a.wouldRelease(size, stream, small, false)
}

// WouldReleaseNew is WouldRelease for a request known to find no cached
// block in its pool (the recording shows it made a new segment), whichever
// pool that is: a private pool's request, which the caller may not have
// routed yet, runs garbage collection on the default pools all the same.
func (a *Allocator) WouldReleaseNew(size int64, stream uint64, small bool) bool {
	return a.wouldRelease(size, stream, small, true)
}

func (a *Allocator) wouldRelease(size int64, stream uint64, small, noFit bool) bool {
	if size <= 0 {
		return false
	}
	r := request{orig: size, stream: stream}
	r.size = a.conf.roundSize(size)
	r.pool = a.getPool(r.size, stream)
	r.allocSize = a.conf.allocationSize(r.size)
	r.expActive = a.conf.ExpandableSegments
	// Pending blocks whose events completed would be freed first.
	if !noFit && a.peekFreeBlock(&r) != 0 {
		return false
	}
	if !small && a.gcEnabled() && a.totalMem > int64(a.conf.GCThreshold*float64(a.limit)) {
		return true // garbage collection may release segments first (§10)
	}
	if a.limit > 0 && a.totalMem+r.allocSize > a.limit {
		return true
	}
	free, _, err := a.dev.MemInfo()
	return err == nil && free < r.allocSize
}

// peekFreeBlock is getFreeBlock without side effects.
func (a *Allocator) peekFreeBlock(r *request) blockID {
	clock := r.pool.gcClock
	id := a.getFreeBlock(r)
	r.pool.gcClock = clock
	if id != 0 {
		a.pools[a.blocks[id].pool].blocks.ReplaceOrInsert(a.key(id))
	}
	return id
}
