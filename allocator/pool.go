package allocator

import "slices"

// PoolID names a memory pool as PyTorch does: (0, 0) is the default pools;
// anything else is a private pool (CUDA graph or torch.cuda.MemPool, §15).
type PoolID struct{ A, B uint64 }

// IsDefault reports whether p is the default pool pair (0, 0).
func (p PoolID) IsDefault() bool { return p.A == 0 && p.B == 0 }

// freeKey orders a BlockPool's free set as BlockComparatorSize (§1): stream,
// then size, then address. The unmapped set uses size 0, which makes it
// BlockComparatorAddress (stream, then address).
type freeKey struct {
	stream uint64
	size   int64
	addr   uint64
	id     blockID
}

// blockPool is PyTorch's BlockPool: the free mapped blocks of one size class
// of one owner, and the unmapped tails of its expandable segments.
type blockPool struct {
	small    bool
	idx      poolIdx
	owner    *privatePool // nil for the default pools
	blocks   sizeSet      // by value: one pointer less to chase per free-set operation
	unmapped freeSet      // by value too: a fresh allocator makes fewer objects
	// gcClock is get_free_blocks_call_count (§10).
	gcClock uint64
}

// newPools makes the small and the large pool of owner (a private pool),
// in one allocation: making an allocator is most of what a replay of a
// small snapshot costs.
func (a *Allocator) newPools(owner *privatePool) (small, large *blockPool) {
	ps := new([2]blockPool)
	return a.addPools([2]*blockPool{&ps[0], &ps[1]}, owner)
}

// addPools makes ps the small and the large pool of owner (nil for the
// default pools, which New makes with the allocator). The pools are empty:
// new, or emptied by Reset (reset.go), which reuses them.
func (a *Allocator) addPools(ps [2]*blockPool, owner *privatePool) (small, large *blockPool) {
	a.pools = slices.Grow(a.pools, 2)
	for i, p := range ps {
		p.small, p.idx, p.owner = i == 0, poolIdx(len(a.pools)), owner
		p.blocks.slab = &a.pages
		a.pools = append(a.pools, p)
	}
	return ps[0], ps[1]
}

func (p *blockPool) id() PoolID {
	if p.owner == nil {
		return PoolID{}
	}
	return p.owner.id
}

// privatePool is a CUDA-graph or MemPool private pool (§15).
type privatePool struct {
	id          PoolID
	useCount    int
	mallocCount int // cudaMalloc_count: segments it owns
	small       *blockPool
	large       *blockPool
}

type capture struct {
	id     PoolID
	filter func(stream uint64) bool
}

// getPool is get_pool (§3.3): the innermost active capture whose filter
// accepts the stream owns the request; otherwise the default pools.
func (a *Allocator) getPool(size int64, stream uint64) *blockPool {
	if len(a.captures) == 0 { // the common case, inlined into Malloc
		if size <= a.conf.SmallSize {
			return a.small
		}
		return a.large
	}
	return a.capturePool(size, stream)
}

// capturePool is getPool while captures are active.
func (a *Allocator) capturePool(size int64, stream uint64) *blockPool {
	for i := len(a.captures) - 1; i >= 0; i-- {
		c := a.captures[i]
		if c.filter == nil || c.filter(stream) {
			pp := a.private[c.id]
			if size <= a.conf.SmallSize {
				return pp.small
			}
			return pp.large
		}
	}
	if size <= a.conf.SmallSize {
		return a.small
	}
	return a.large
}

// BeginAllocateToPool routes the mallocs of streams accepted by filter (all
// streams if nil) to private pool id until EndAllocateToPool
// (beginAllocateToPool, §15). The pool is created on first use.
func (a *Allocator) BeginAllocateToPool(id PoolID, filter func(stream uint64) bool) {
	pp := a.private[id]
	if pp == nil {
		pp = a.newPrivate(id)
		if a.private == nil {
			a.private = make(map[PoolID]*privatePool)
		}
		a.private[id] = pp
	}
	pp.useCount++
	delete(a.freeable, id)
	a.captures = append(a.captures, capture{id: id, filter: filter})
	a.sink.room = 0 // a private pool exists: events take sinkEvent, which checks pools
}

// EndAllocateToPool stops routing mallocs to private pool id.
func (a *Allocator) EndAllocateToPool(id PoolID) {
	for i := len(a.captures) - 1; i >= 0; i-- {
		if a.captures[i].id == id {
			a.captures = append(a.captures[:i], a.captures[i+1:]...)
			return
		}
	}
}

// ReleasePool drops one use of private pool id. At zero uses the pool becomes
// freeable: the next EmptyCache returns its unsplit segments (§15).
func (a *Allocator) ReleasePool(id PoolID) {
	if pp := a.private[id]; pp != nil && pp.useCount > 0 {
		pp.useCount--
		if pp.useCount == 0 {
			if a.freeable == nil {
				a.freeable = make(map[PoolID]*privatePool)
			}
			a.freeable[id] = pp
		}
	}
}

// Fits reports whether a malloc of size bytes on stream, routed to pool id
// ((0, 0) for the default pools), would be served from a cached free block
// of that pool, without a new segment. It changes nothing. A private pool
// that does not exist fits nothing. A replay that must tell which pool a
// recorded request went to asks it: a request that made a new segment
// although its pool had a fitting block was served by another pool.
func (a *Allocator) Fits(id PoolID, size int64, stream uint64) bool {
	if size <= 0 {
		return false
	}
	r := request{orig: size, stream: stream}
	r.size = a.conf.roundSize(size)
	r.allocSize = a.conf.allocationSize(r.size)
	r.expActive = a.conf.ExpandableSegments
	small := r.size <= a.conf.SmallSize
	switch {
	case id.IsDefault() && small:
		r.pool = a.small
	case id.IsDefault():
		r.pool = a.large
	default:
		pp := a.private[id]
		if pp == nil {
			return false
		}
		r.pool = pp.large
		if small {
			r.pool = pp.small
		}
	}
	return a.peekFreeBlock(&r) != 0
}

// FitsUpTo bounds Fits for a summary kept per pool: every malloc on stream
// of the class small (rounded size at most SmallSize, or above it) whose
// rounded size is at most max is served by pool id from a cached block,
// and none larger is (max is the pool's largest free block there, -1 if
// it has none). ok is false where a size does not decide Fits
// (expandable segments, max_split_size_mb): then ask Fits.
func (a *Allocator) FitsUpTo(id PoolID, small bool, stream uint64) (max int64, ok bool) {
	if a.conf.ExpandableSegments || len(a.exps) != 0 || a.conf.MaxSplitSize != Unlimited {
		return 0, false
	}
	var p *blockPool
	switch pp := a.private[id]; {
	case id.IsDefault() && small:
		p = a.small
	case id.IsDefault():
		p = a.large
	case pp == nil:
		return -1, true
	case small:
		p = pp.small
	default:
		p = pp.large
	}
	sb := p.blocks.stream(stream)
	if sb == nil {
		return -1, true
	}
	c := sb.prev(maxClasses - 1)
	if c < 0 {
		return -1, true
	}
	h := sb.binAt(c)
	return h.at(h.len() - 1).size, true
}

// InUse reports whether private pool id exists and has uses left (a live
// CUDA graph or MemPool holds it); EmptyCache returns the segments of a pool
// only when it has none.
func (a *Allocator) InUse(id PoolID) bool {
	pp := a.private[id]
	return pp != nil && pp.useCount > 0
}
