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
	small  bool
	idx    poolIdx
	owner  *privatePool // nil for the default pools
	blocks sizeSet      // by value: one pointer less to chase per free-set operation
	// unmapped is made on the first unmapped range (unmappedSet): only
	// expandable segments have them, and a set is 328 bytes, most of them
	// pointer slots that every collection scans, in every block pool.
	unmapped *freeSet
	// gcClock is get_free_blocks_call_count (§10).
	gcClock uint64
}

// addPools makes ps the small and the large default pool (New and Reset
// make them with the allocator).
func (a *Allocator) addPools(ps [2]*blockPool) (small, large *blockPool) {
	a.pools = slices.Grow(a.pools, 2)
	for i, p := range ps {
		p.small, p.idx = i == 0, poolIdx(len(a.pools))
		p.blocks.slab = &a.pages
		a.pools = append(a.pools, p)
	}
	return ps[0], ps[1]
}

// blocksOf returns pp's block pool for small requests or for large ones,
// made on its first need (privateBlocks). A private pool starts with
// neither: one that serves requests of one class (a CUDA graph of small
// tensors, or of large ones) never makes the other, whose free sets' headers
// (a block pool is about 600 bytes, with pointers that every collection
// scans) were half of what a replay of 64,000 live private pools held.
func (a *Allocator) blocksOf(pp *privatePool, small bool) *blockPool {
	if small {
		if pp.small == nil {
			pp.small = a.privateBlocks(pp, true)
		}
		return pp.small
	}
	if pp.large == nil {
		pp.large = a.privateBlocks(pp, false)
	}
	return pp.large
}

// unmappedSet returns p's unmapped set, made if p has none yet.
func (p *blockPool) unmappedSet() *freeSet {
	if p.unmapped == nil {
		p.unmapped = new(freeSet)
	}
	return p.unmapped
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
	// small and large are its block pools, nil until the first request
	// of their class (blocksOf); a nil one has no blocks.
	small *blockPool
	large *blockPool
}

// blockPools returns those of pp's block pools that exist.
func (pp *privatePool) blockPools() []*blockPool {
	ps := make([]*blockPool, 0, 2)
	for _, p := range [2]*blockPool{pp.small, pp.large} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
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
			return a.blocksOf(a.private[c.id], size <= a.conf.SmallSize)
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
		if r.pool == nil {
			return false // no request of the class made it: it has no blocks
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
	if p == nil {
		return -1, true // a private pool's, not made: no blocks
	}
	p.blocks.flush()
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
