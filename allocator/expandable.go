package allocator

import (
	"errors"
	"fmt"
)

// expSegment is an ExpandableSegment (§9): a virtual reservation bound to one
// stream and pool, mapped and unmapped a page at a time.
type expSegment struct {
	base   uint64
	size   int64 // reserved bytes
	page   int64
	stream uint64
	pool   *blockPool
	idx    expIdx
	pos    int // its index in Allocator.exps
}

// allocExpandable is try_allocate_expandable_block (§9): find a run of free
// and unmapped blocks that can hold r.size, map what is missing, and return
// the resulting free block, removed from the free set. 0 means out of memory.
func (a *Allocator) allocExpandable(r *request) (blockID, error) {
	c, err := a.findExpandable(r)
	if err != nil || c == 0 {
		return 0, err
	}
	if !a.blocks[c].mapped {
		ok, err := a.mapBlock(c, min(a.blocks[c].size, r.size))
		if !ok || err != nil {
			return 0, err
		}
	}
	for a.blocks[c].size < r.size {
		nc := a.blocks[c].next
		ok, err := a.mapBlock(nc, min(r.size-a.blocks[c].size, a.blocks[nc].size))
		if !ok || err != nil {
			return 0, err
		}
		c = nc
	}
	a.removeFree(c)
	return c, nil
}

func (a *Allocator) allocatable(id blockID) bool {
	if id == 0 {
		return false
	}
	b := &a.blocks[id]
	return !b.allocated && b.events == 0 && !b.used
}

// findExpandable is find_expandable_block: the first unmapped block of the
// stream (by address) from which, possibly starting at its free predecessor,
// consecutive allocatable blocks reach size; else a new reservation.
func (a *Allocator) findExpandable(r *request) (blockID, error) {
	p := r.pool
	var found blockID
	p.unmapped.AscendGreaterOrEqual(freeKey{stream: r.stream}, func(k freeKey) bool {
		if k.stream != r.stream {
			return false
		}
		c := k.id
		if prev := a.blocks[c].prev; a.allocatable(prev) {
			c = prev
		}
		var bytes int64
		for b := c; bytes < r.size && a.allocatable(b); b = a.blocks[b].next {
			bytes += a.blocks[b].size
		}
		if bytes >= r.size {
			found = c
			return false
		}
		return true
	})
	if found != 0 {
		return found, nil
	}
	page := a.conf.LargeSegmentSize
	if p.small {
		page = a.conf.SmallBuffer
	}
	_, total, err := a.dev.MemInfo()
	if err != nil {
		return 0, fmt.Errorf("allocator: memory info: %w", err)
	}
	size := reservationSize(total, page)
	base, err := a.dev.Reserve(size)
	if err != nil {
		return 0, fmt.Errorf("allocator: reserve %d bytes: %w", size, err)
	}
	if len(a.expTab) == 0 {
		a.expTab = append(a.expTab, nil) // expIdx 0 is none; made here, as few allocators need it
	}
	e := a.newExp(expSegment{base: base, size: size, page: page, stream: r.stream, pool: p, idx: expIdx(len(a.expTab))})
	a.expTab = append(a.expTab, e)
	a.addExp(e)
	id := a.newBlock(base, size, r.stream, p)
	a.blocks[id].mapped = false
	a.blocks[id].exp = e.idx
	p.unmappedSet().ReplaceOrInsert(a.ukey(id))
	return id, nil
}

// mapBlock is map_block: map whole pages covering the first size bytes of the
// unmapped block id, split off the unmapped rest, merge with free neighbours.
func (a *Allocator) mapBlock(id blockID, size int64) (bool, error) {
	b := &a.blocks[id]
	e, p := a.expTab[b.exp], a.pools[b.pool]
	off := int64(b.addr - e.base)
	begin := off / e.page
	end := ceilDiv(off+size, e.page) // off+size lies in the reservation: no overflow
	maddr, msize := e.base+uint64(begin*e.page), (end-begin)*e.page
	if err := a.dev.Map(maddr, msize); err != nil {
		if errors.Is(err, ErrDeviceOOM) {
			return false, nil
		}
		return false, fmt.Errorf("allocator: map %d bytes at %#x: %w", msize, maddr, err)
	}
	old := a.ukey(id)
	b.mapped = true
	if msize >= b.size {
		p.unmapped.Delete(old)
	} else {
		rem := a.newBlock(b.addr+uint64(msize), b.size-msize, b.stream, p)
		b = &a.blocks[id]
		rb := &a.blocks[rem]
		rb.mapped, rb.exp = false, e.idx
		rb.prev, rb.next = id, b.next
		if b.next != 0 {
			a.blocks[b.next].prev = rem
		}
		b.next = rem
		b.size = msize
		// The rest lies inside the block's range, so no other key of the
		// stream sorts between the two: its key takes the block's place.
		p.unmapped.Rekey(old, a.ukey(rem))
	}
	a.tryMerge(id, a.blocks[id].prev)
	a.tryMerge(id, a.blocks[id].next)
	a.insertFree(id)
	a.totalMem += msize
	st := a.statTypes(p)
	a.stats.ReservedBytes.inc(st, msize)
	a.stats.NumDeviceAlloc++
	a.emit(ActSegmentMap, maddr, msize, e.stream, p, 0)
	return true, nil
}

// unmapBlock is unmap_block: unmap the pages lying entirely inside the free
// block id; partial pages at either end stay mapped as free blocks. A segment
// left fully unmapped is released.
func (a *Allocator) unmapBlock(id blockID) error {
	b := &a.blocks[id]
	e, p := a.expTab[b.exp], a.pools[b.pool]
	off := int64(b.addr - e.base)
	begin := (off + e.page - 1) / e.page
	end := (off + b.size) / e.page
	if begin >= end {
		return nil
	}
	uaddr, usize := e.base+uint64(begin*e.page), (end-begin)*e.page
	if err := a.dev.Unmap(uaddr, usize); err != nil {
		return fmt.Errorf("allocator: unmap %d bytes at %#x: %w", usize, uaddr, err)
	}
	p.blocks.Delete(a.key(id))
	if before := int64(uaddr - b.addr); before > 0 {
		bf := a.newBlock(b.addr, before, b.stream, p)
		b = &a.blocks[id]
		fb := &a.blocks[bf]
		fb.exp, fb.prev, fb.next = e.idx, b.prev, id
		if b.prev != 0 {
			a.blocks[b.prev].next = bf
		}
		b.prev = bf
		a.insertFree(bf)
	}
	if after := b.size - int64(uaddr-b.addr) - usize; after > 0 {
		af := a.newBlock(uaddr+uint64(usize), after, b.stream, p)
		b = &a.blocks[id]
		ab := &a.blocks[af]
		ab.exp, ab.prev, ab.next = e.idx, id, b.next
		if b.next != 0 {
			a.blocks[b.next].prev = af
		}
		b.next = af
		a.insertFree(af)
	}
	b.addr, b.size, b.mapped = uaddr, usize, false
	a.tryMerge(id, a.blocks[id].prev)
	a.tryMerge(id, a.blocks[id].next)
	p.unmappedSet().ReplaceOrInsert(a.ukey(id))
	a.totalMem -= usize
	st := a.statTypes(p)
	a.stats.ReservedBytes.dec(st, usize)
	a.stats.NumDeviceFree++
	a.emit(ActSegmentUnmap, uaddr, usize, e.stream, p, 0)

	if b := &a.blocks[id]; b.prev == 0 && b.next == 0 {
		// release_expandable_segment
		if err := a.dev.Release(e.base, e.size); err != nil {
			return fmt.Errorf("allocator: release reservation %#x: %w", e.base, err)
		}
		p.unmapped.Delete(a.ukey(id))
		a.deleteBlock(id)
		a.dropExp(e)
	}
	return nil
}

// reservationSize is the address space an ExpandableSegment reserves:
// numSegments(total + total/8) pages, the page count rounded up, so at
// least one page even where a page is larger than the device
// (large_segment_size_mb beyond it: mapping that page then fails as out of
// memory, as cuMemCreate does).
func reservationSize(total, page int64) int64 {
	return ceilDiv(total+total/8, page) * page
}

// ceilDiv is ⌈n/d⌉ for n ≥ 0, d > 0, without the overflow of n+d-1.
func ceilDiv(n, d int64) int64 {
	q := n / d
	if n%d != 0 {
		q++
	}
	return q
}
