package allocator

import (
	"fmt"
	"math/bits"
)

// Reset makes a the allocator New(conf, dev) would return, reusing the
// memory a holds: its block arena, free block IDs, address index, pools
// (private ones included), size-class pages and pending list. A replay of
// a small snapshot costs as much in making a fresh allocator and in the
// garbage collection that this memory causes as in its events; a caller
// that replays many times in a row (replay.Replayer) resets one allocator
// instead.
//
// Afterwards every call behaves, and every event, statistic, segment and
// error comes out, exactly as on a fresh allocator (TestResetFields and
// FuzzReset check it). Whatever a held before is gone: its observer or
// event sink (to which the events written and not yet handed over are
// handed first, as SetEventSink(nil, nil) does), its memory limit, private
// pools and captures. The blocks of the old state are forgotten, not
// freed: dev must not be the device of the old state unless it was reset
// too (SimDevice.Reset). The zero Allocator may be Reset.
//
// If conf is not valid, or dev's MemInfo fails when conf.MemoryFraction
// needs it, Reset returns the error New would and leaves a unchanged.
func (a *Allocator) Reset(conf Conf, dev Device) error {
	if err := conf.Validate(); err != nil {
		return err
	}
	var limit int64
	if conf.MemoryFraction < 1 {
		_, total, err := dev.MemInfo()
		if err != nil {
			return fmt.Errorf("allocator: memory info: %w", err)
		}
		limit = fractionLimit(conf.MemoryFraction, total)
	}
	a.FlushEvents()
	sp := a.pages.spare
	if sp == nil {
		sp = new(spareMem)
		a.pages.spare = sp
	}
	sp.pages = 0

	if cap(a.blocks) == 0 {
		a.blocks = make([]block, 1, 16)
	} else {
		// newBlock appends zero blocks: the slots past 1 need no clearing.
		a.blocks = a.blocks[:1]
		a.blocks[0] = block{}
	}
	a.freeIDs = a.freeIDs[:0]
	a.active.Clear()
	a.indexed = false

	if a.small == nil {
		ps := new([2]blockPool)
		a.small, a.large = a.addPools([2]*blockPool{&ps[0], &ps[1]})
	} else {
		a.small.reset()
		a.large.reset()
		// Every block pool of a private pool ever made, the ones
		// EmptyCache deleted included, is in pools: keep them for
		// privateBlocks, and the private pools for newPrivate.
		for _, p := range a.pools[2:] {
			p.reset()
			p.owner = nil
			sp.pools = append(sp.pools, p)
		}
		clear(a.pools[2:])
		a.pools = a.pools[:2]
		a.deadPools = a.deadPools[:0]
		for _, pp := range a.private {
			sp.privates = append(sp.privates, pp)
		}
		sp.privates = append(sp.privates, a.deadPrivates...)
		clear(a.deadPrivates)
		a.deadPrivates = a.deadPrivates[:0]
	}
	clear(a.private)
	clear(a.freeable)
	clear(a.captures) // drops the filters
	a.captures = a.captures[:0]
	a.clearExps()
	// Every expandable segment made, released ones included, is in expTab.
	for _, e := range a.expTab {
		if e != nil {
			*e = expSegment{}
			sp.exps = append(sp.exps, e)
		}
	}
	clear(a.expTab)
	a.expTab = a.expTab[:0]
	a.uses.reset()
	a.pages.reset() // after the pools' sets, which count the pages

	a.pending, a.doneIDs, a.late = a.pending[:0], a.doneIDs[:0], a.late[:0]
	a.pendAt = a.pendAt[:0]
	a.pendDead, a.done = 0, 0
	a.activeApart = false
	a.briefOOMs, a.noBlockStats = false, false

	a.conf, a.dev = conf, dev
	a.roundMask = conf.MinBlockSize - 1
	for _, d := range conf.RoundupDivisions {
		if uint64(d) > 1 {
			a.roundMask = -1
		}
	}
	a.limit = limit
	a.totalMem = 0
	a.stats = Stats{MaxSplitSize: conf.MaxSplitSize}
	a.obs, a.ev, a.sink, a.observed = nil, Event{}, sinkState{}, false
	return nil
}

// spareMem is memory an allocator uses again rather than allocate anew:
// what a Reset kept, and scratch buffers. It holds no state. The first
// Reset makes it (pageSlab.spare): a new allocator, which no Reset
// has made, has none, and is no larger for it.
type spareMem struct {
	// pools are emptied block pools of private pools, for privateBlocks,
	// and privates the private pools, for newPrivate.
	pools    []*blockPool
	privates []*privatePool
	// exps are emptied expandable segments, for newExp.
	exps []*expSegment
	// bins are emptied bins of streams, for pageSlab.streamBins.
	bins []*streamBins
	// tables are page tables of streams (streamBins.pages) that outgrew
	// their first, for pageSlab.table.
	tables [][]*binPage
	// whole and exp are releaseBlocks' lists of the blocks to release.
	whole, exp []blockID
	// slab holds the pages pageSlab hands out first after a Reset, all
	// empty; pages counts the pages handed out before it.
	slab  []binPage
	pages int
}

// newPrivate makes private pool id, with no block pools yet (blocksOf
// makes them): a deleted pool's if there is one, else one a Reset kept,
// else a new one.
func (a *Allocator) newPrivate(id PoolID) *privatePool {
	pp, ok := popLast(&a.deadPrivates)
	if sp := a.pages.spare; !ok && sp != nil {
		pp, ok = popLast(&sp.privates)
	}
	if !ok {
		pp = bulk(&a.pages.privates, len(a.pools))
	}
	*pp = privatePool{id: id}
	return pp
}

// bulk returns a new zero T from *free, refilled with a chunk when empty:
// private pools and their block pools are made in chunks, a quarter of the
// pools made so far (have) up to 64, so that thousands of pools are a few
// large objects for the runtime to allocate and the collector to find,
// rather than one each, and a run of a few pools makes them one by one.
func bulk[T any](free *[]T, have int) *T {
	if len(*free) == 0 {
		*free = make([]T, min(max(1, have/4), 64))
	}
	p := &(*free)[0]
	*free = (*free)[1:]
	return p
}

// popLast removes the last element of *s and returns it, clearing its slot;
// ok is false when *s is empty.
func popLast[T any](s *[]T) (last T, ok bool) {
	n := len(*s)
	if n == 0 {
		return last, false
	}
	last = (*s)[n-1]
	var zero T
	(*s)[n-1] = zero
	*s = (*s)[:n-1]
	return last, true
}

// privateBlocks makes a block pool of owner for small requests or large
// ones: one of a pool EmptyCache deleted if there is one, else one a Reset
// kept, else a new one. A deleted pool's free sets are empty (it had no
// segments left) and stay as they are: a set emptied block by block is a
// set as good as new.
func (a *Allocator) privateBlocks(owner *privatePool, small bool) *blockPool {
	var p *blockPool
	if i, ok := popLast(&a.deadPools); ok {
		p = a.pools[i]
		p.gcClock = 0
	} else {
		if sp := a.pages.spare; sp != nil {
			p, ok = popLast(&sp.pools)
		}
		if !ok {
			p = bulk(&a.pages.blockPools, len(a.pools))
		}
		p.idx, p.blocks.slab = poolIdx(len(a.pools)), &a.pages
		a.pools = append(a.pools, p)
	}
	p.small, p.owner = small, owner
	return p
}

// newExp returns a new expandable segment holding e: a kept one, or a new
// one.
func (a *Allocator) newExp(e expSegment) *expSegment {
	sp := a.pages.spare
	if sp == nil || len(sp.exps) == 0 {
		return &e
	}
	n := len(sp.exps)
	p := sp.exps[n-1]
	sp.exps[n-1] = nil
	sp.exps = sp.exps[:n-1]
	*p = e
	return p
}

// releaseLists returns empty lists for releaseBlocks, with the room of the
// ones it kept (keepReleaseLists) if the allocator has spare memory.
func (a *Allocator) releaseLists() (whole, exp []blockID) {
	if sp := a.pages.spare; sp != nil {
		return sp.whole[:0], sp.exp[:0]
	}
	return nil, nil
}

// keepReleaseLists keeps releaseBlocks' lists for its next call.
func (a *Allocator) keepReleaseLists(whole, exp []blockID) {
	if sp := a.pages.spare; sp != nil {
		sp.whole, sp.exp = whole, exp
	}
}

// reset empties p's free sets, keeping their memory; addPools sets the
// rest again when p is reused.
func (p *blockPool) reset() {
	p.blocks.reset()
	if p.unmapped != nil {
		p.unmapped.reset()
	}
	p.gcClock = 0
}

// reset empties s as a new set, keeping the bins of its streams but the
// first (which s holds itself) for the allocator's next sets (streamBins),
// and their page tables (table). It empties their pages and counts them
// for pageSlab.reset.
func (s *sizeSet) reset() {
	if s.streams == nil {
		return // as new: nothing writes a set but for the streams it has
	}
	sp := s.slab.spare
	for _, x := range s.streams {
		x.b.emptyClasses()
		for _, p := range x.b.pages {
			if p != nil {
				sp.pages++
			}
		}
		s.slab.keepTable(x.b)
		*x.b = streamBins{}
		if x.b != &s.own {
			sp.bins = append(sp.bins, x.b)
		}
	}
	s.streams, s.idx, s.lastSt, s.lastB, s.n, s.ownRefs = nil, nil, 0, nil, 0, [2]streamRef{}
	s.pend = [3]freeKey{}
}

// emptyClasses empties every non-empty class of b, keeping its rest
// buffer. The classes that are empty are as new already (but for their
// rest buffers, emptied with them), so that the pages of b, handed out
// again after a Reset, are clean.
func (b *streamBins) emptyClasses() {
	for s := b.sum; s != 0; s &= s - 1 {
		w := bits.TrailingZeros64(s)
		for m := b.words[w]; m != 0; m &= m - 1 {
			h := b.binAt(w<<6 + bits.TrailingZeros64(m))
			if h.rest != nil {
				h.rest.empty()
			}
			*h = bin{rest: h.rest}
		}
	}
}

// reset empties s, keeping a few leaves for reuse.
func (s *freeSet) reset() { s.t.clearKeep() }

// reset makes the pages handed out since the last Reset (sizeSet.reset
// emptied and counted them) the ones to hand out again: the slab of the
// last Reset, if they were all from it, else a slab as long as they were,
// which the next replay of the same size takes all of its pages from.
// take, on the malloc path, stays as it is: it hands out the slab's pages,
// then new ones.
func (ps *pageSlab) reset() {
	sp := ps.spare
	if sp.pages > len(sp.slab) {
		sp.slab = make([]binPage, sp.pages)
	}
	ps.free = sp.slab
}

// streamBins returns empty bins for a new stream of a set: ones a Reset
// kept, else new ones.
func (ps *pageSlab) streamBins() *streamBins {
	if sp := ps.spare; sp != nil && len(sp.bins) > 0 {
		n := len(sp.bins)
		b := sp.bins[n-1]
		sp.bins[n-1] = nil
		sp.bins = sp.bins[:n-1]
		return b
	}
	return new(streamBins)
}

// table returns a page table of n pages, all nil, for b, whose table grows
// to that: a kept one if one is long enough (the shortest), else a new one.
// It keeps b's table so far, which the caller copies before the next call,
// unless that is b's own array.
func (ps *pageSlab) table(b *streamBins, n int) []*binPage {
	sp := ps.spare
	if sp == nil {
		return make([]*binPage, n) // a new allocator keeps nothing
	}
	best := -1
	for i, t := range sp.tables {
		if cap(t) >= n && (best < 0 || cap(t) < cap(sp.tables[best])) {
			best = i
		}
	}
	var t []*binPage
	if best < 0 {
		t = make([]*binPage, n)
	} else {
		t = sp.tables[best][:n]
		clear(t)
		last := len(sp.tables) - 1
		sp.tables[best], sp.tables[last] = sp.tables[last], nil
		sp.tables = sp.tables[:last]
	}
	ps.keepTable(b)
	return t
}

// keepTable keeps b's page table for table, unless it is b's own array (or
// the allocator keeps nothing).
func (ps *pageSlab) keepTable(b *streamBins) {
	if sp := ps.spare; sp != nil && len(b.pages) > 0 && &b.pages[0] != &b.table[0] {
		sp.tables = append(sp.tables, b.pages)
	}
}
