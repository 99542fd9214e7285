package allocator

// The expandable segments an allocator has reserved (exps), indexed so that
// the questions asked of them cost O(log n) or O(1) whatever their number:
// which reservation holds an address (by base, in a kTree), whether a pool
// has one for a stream and size class, and whether a private pool has any
// (counts in maps). A program with a reservation per stream or per private
// pool (graphs, MemPools under expandable_segments) asks these per request
// while annotating an import; a scan of exps made that O(reservations).

// expUse is a (pool, size class, stream) that holds expandable segments.
type expUse struct {
	pool   PoolID
	small  bool
	stream uint64
}

// expIndex indexes Allocator.exps.
type expIndex struct {
	byBase kTree // freeKey{addr: base, id: expIdx}; reservations do not overlap
	uses   map[expUse]int32
	owners map[PoolID]int32 // by private pool: ids are unique while a pool holds segments
}

// addExp records the new (or restored) expandable segment e.
func (a *Allocator) addExp(e *expSegment) {
	e.pos = len(a.exps)
	a.exps = append(a.exps, e)
	x := &a.expIx
	x.byBase.insert(freeKey{addr: e.base, id: blockID(e.idx)})
	if x.uses == nil {
		x.uses, x.owners = map[expUse]int32{}, map[PoolID]int32{}
	}
	x.uses[expUse{e.pool.id(), e.pool.small, e.stream}]++
	if e.pool.owner != nil {
		x.owners[e.pool.owner.id]++
	}
}

// dropExp forgets the released expandable segment e.
func (a *Allocator) dropExp(e *expSegment) {
	last := a.exps[len(a.exps)-1]
	a.exps[e.pos], last.pos = last, e.pos
	a.exps[len(a.exps)-1] = nil
	a.exps = a.exps[:len(a.exps)-1]
	x := &a.expIx
	x.byBase.delete(freeKey{addr: e.base})
	u := expUse{e.pool.id(), e.pool.small, e.stream}
	if x.uses[u]--; x.uses[u] == 0 {
		delete(x.uses, u)
	}
	if o := e.pool.owner; o != nil {
		if x.owners[o.id]--; x.owners[o.id] == 0 {
			delete(x.owners, o.id)
		}
	}
}

// clearExps forgets every expandable segment (Reset).
func (a *Allocator) clearExps() {
	clear(a.exps)
	a.exps = a.exps[:0]
	a.expIx.byBase.clearKeep()
	clear(a.expIx.uses)
	clear(a.expIx.owners)
}

// ExpandableOwner reports the pool of the expandable segment whose reserved
// range holds addr, if there is one.
func (a *Allocator) ExpandableOwner(addr uint64) (PoolID, bool) {
	t := &a.expIx.byBase
	if t.Len() == 0 || addr == ^uint64(0) {
		return PoolID{}, false
	}
	r := t.lowerRank(freeKey{addr: addr + 1}) // the first base above addr
	if r == 0 {
		return PoolID{}, false
	}
	e := a.expTab[t.at(r-1).id]
	if addr >= e.base+uint64(e.size) {
		return PoolID{}, false
	}
	return e.pool.id(), true
}

// HasExpandable reports whether pool id has an expandable segment for
// stream in the class of a request of size bytes: a malloc routed there
// maps pages into it rather than reserving another.
func (a *Allocator) HasExpandable(id PoolID, size int64, stream uint64) bool {
	small := a.conf.roundSize(size) <= a.conf.SmallSize
	return a.expIx.uses[expUse{id, small, stream}] > 0
}

// hasExpandable reports whether private pool pp holds an expandable segment.
func (a *Allocator) hasExpandable(pp *privatePool) bool { return a.expIx.owners[pp.id] > 0 }
