package replay

import (
	"math"
	"sync/atomic"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/ordered"
	"github.com/tracer-dev/tracer/trace"
)

// memIndex answers otherPool's question, the first MemPool met, in use,
// that has no room on stream 0 for a request, in O(log n) rather than by
// a scan of every MemPool met (each fresh segment of a recording that made
// one pool per segment scanned them all: quadratic).
//
// Outside expandable segments and max_split_size_mb a pool has room for a
// request exactly when its largest free block on stream 0 in the request's
// class is not below the request's rounded size (allocator.FitsUpTo). The
// index keeps that size per MemPool and class, in meeting order, in a
// min-tree (MaxInt64 for a pool not in use, which the scan skips); the
// first leaf below the rounded size is the answer. A pool's leaf changes
// only with an allocator event in that pool (every change to its free
// blocks has one) or a change of its uses, which the replay makes: both
// mark the leaf stale, and a query refreshes the stale leaves first. The
// leaf found is checked with room before it is the answer; a pool gains
// room by frees (events) and loses it only by a malloc routed to it, which
// beginPool marks too, so no leaf claims a room the pool lacks.
type memIndex struct {
	pools []allocator.PoolID
	at    map[allocator.PoolID]int
	stale []int  // leaves to refresh
	dirty []bool // per leaf: in stale
	// tree is a min-tree over [2]int64 leaves (small, large class), the
	// leaves at tree[cap:], cap a power of two.
	tree [][2]int64
	cap  int
}

// noRoomVisits counts the MemPools otherPool checks for room while
// countVisits is set, for the work tests (atomic: imports replay devices
// in parallel).
var (
	countVisits  bool
	noRoomVisits atomic.Int64
	suffixVisits atomic.Int64 // the steps of captures.later's lookups
)

// checkMemIndex makes otherPool compare the index's answer with the scan's
// (set by the package's tests).
var checkMemIndex bool

// add appends MemPool p, met now.
func (x *memIndex) add(p allocator.PoolID) {
	if x.at == nil {
		x.at = map[allocator.PoolID]int{}
	}
	i := len(x.pools)
	x.pools = append(x.pools, p)
	x.dirty = append(x.dirty, false)
	x.at[p] = i
	if i >= x.cap {
		n := max(2*x.cap, 16)
		t := make([][2]int64, 2*n)
		for j := range t {
			t[j] = [2]int64{math.MaxInt64, math.MaxInt64}
		}
		copy(t[n:], x.tree[x.cap:])
		for j := n - 1; j >= 1; j-- {
			t[j] = minPair(t[2*j], t[2*j+1])
		}
		x.tree, x.cap = t, n
	}
	x.mark(i)
}

// has reports whether MemPool p is in the index.
func (x *memIndex) has(p allocator.PoolID) bool {
	_, ok := x.at[p]
	return ok
}

// touched marks the leaf of pool p, if it is one, stale.
func (x *memIndex) touched(p allocator.PoolID) {
	if !isMemPool(p) {
		return // most events are the default pools'
	}
	if i, ok := x.at[p]; ok {
		x.mark(i)
	}
}

func (x *memIndex) mark(i int) {
	if !x.dirty[i] {
		x.dirty[i] = true
		x.stale = append(x.stale, i)
	}
}

// markAll marks every leaf stale.
func (x *memIndex) markAll() {
	for i := range x.pools {
		x.mark(i)
	}
}

func minPair(a, b [2]int64) [2]int64 { return [2]int64{min(a[0], b[0]), min(a[1], b[1])} }

// refresh recomputes the stale leaves from a; it reports false where the
// sizes do not decide room (FitsUpTo's ok).
func (x *memIndex) refresh(a *allocator.Allocator) bool {
	for len(x.stale) > 0 {
		i := x.stale[len(x.stale)-1]
		p := x.pools[i]
		v := [2]int64{math.MaxInt64, math.MaxInt64}
		if a.InUse(p) {
			s, ok := a.FitsUpTo(p, true, 0)
			l, _ := a.FitsUpTo(p, false, 0)
			if !ok {
				return false
			}
			v = [2]int64{s, l}
		}
		x.stale = x.stale[:len(x.stale)-1]
		x.dirty[i] = false
		j := x.cap + i
		x.tree[j] = v
		for j >>= 1; j >= 1; j >>= 1 {
			x.tree[j] = minPair(x.tree[2*j], x.tree[2*j+1])
		}
	}
	return true
}

// first returns the first leaf at or after from whose class c value is
// below size, or -1.
func (x *memIndex) first(from, c int, size int64) int {
	if from >= len(x.pools) {
		return -1
	}
	// Walk up from the leaf until a right subtree holds a hit, then down.
	j := x.cap + from
	if x.tree[j][c] < size {
		return from
	}
	for {
		for j&1 == 1 { // the right child: its parent's right part is done
			j >>= 1
			if j == 0 {
				return -1
			}
		}
		j++ // the right sibling
		if x.tree[j][c] < size {
			break
		}
	}
	for j < x.cap {
		j *= 2
		if x.tree[j][c] >= size {
			j++
		}
	}
	if i := j - x.cap; i < len(x.pools) {
		return i
	}
	return -1
}

// noRoomMemPool is otherPool's search on stream 0: the first MemPool met,
// other than not, in use and without room for ev ((0, 0) if none); ok is
// false where the index cannot answer (then the caller scans).
func (r *deviceReplay) noRoomMemPool(ev *trace.Event, expandable bool, not allocator.PoolID) (p allocator.PoolID, ok bool) {
	x := &r.pools.ix
	if ev.Size <= 0 || !x.refresh(r.a) {
		return allocator.PoolID{}, false
	}
	conf := r.a.Conf()
	size := conf.RoundSize(ev.Size)
	c := 1
	if size <= conf.SmallSize {
		c = 0
	}
	for i := x.first(0, c, size); i >= 0; i = x.first(i+1, c, size) {
		m := x.pools[i]
		if countVisits {
			noRoomVisits.Add(1)
		}
		if m != not && r.a.InUse(m) && !r.room(m, ev, expandable) {
			return m, true
		}
	}
	return allocator.PoolID{}, true
}

// poolWatch is the allocator's Observer of an annotating replay that has
// none otherwise: it marks the MemPools whose free blocks events change.
type poolWatch struct{ r *deviceReplay }

func (w poolWatch) AllocatorEvent(e *allocator.Event) { w.r.pools.ix.touched(e.Pool) }

// segIndex holds the live recorded segments that private-pool allocations
// created, for the pool of an allocation inside one (contains) and of a
// segment's release (take). They are kept by address while no two overlap,
// so that both are O(log n) rather than a scan of every live segment;
// once two overlap (a malformed recording), or a size does not make a
// range, the segments go into a list in the order added and are scanned,
// where the first added that holds an address wins. Until then at most one
// holds an address, so the list's order is the same answer. A segment is
// kept as its range and pool alone (poolSeg), which hold no pointer: the
// tree's leaves of a recording with a private pool a segment are then
// a third the size, with nothing in them for the collector to follow.
type segIndex struct {
	byAddr ordered.Map[uint64, poolSeg]
	list   []poolSeg
	flat   bool
}

// poolSeg is a segment of a segIndex.
type poolSeg struct {
	addr uint64
	size int64
	pool allocator.PoolID
}

// Len returns the number of segments.
func (x *segIndex) Len() int {
	if x.flat {
		return len(x.list)
	}
	return x.byAddr.Len()
}

// add notes segment s, made now.
func (x *segIndex) add(seg allocator.SegmentInfo) {
	s := poolSeg{addr: seg.Addr, size: seg.Size, pool: seg.Pool}
	if !x.flat {
		end := s.addr + uint64(s.size)
		if s.size > 0 && end > s.addr {
			if k, v, ok := x.byAddr.Floor(end - 1); !ok || k+uint64(v.size) <= s.addr {
				x.byAddr.Insert(s.addr, s)
				return
			}
		}
		x.flat = true
		x.byAddr.Each(func(_ uint64, v poolSeg) { x.list = append(x.list, v) })
		x.byAddr = ordered.Map[uint64, poolSeg]{}
	}
	x.list = append(x.list, s)
}

// contains returns the pool of the segment holding addr.
func (x *segIndex) contains(addr uint64) (allocator.PoolID, bool) {
	if !x.flat {
		if k, v, ok := x.byAddr.Floor(addr); ok && addr < k+uint64(v.size) {
			return v.pool, true
		}
		return allocator.PoolID{}, false
	}
	for i := range x.list {
		if s := &x.list[i]; addr >= s.addr && addr < s.addr+uint64(s.size) {
			return s.pool, true
		}
	}
	return allocator.PoolID{}, false
}

// take removes the segment at addr and returns its pool.
func (x *segIndex) take(addr uint64) (allocator.PoolID, bool) {
	if !x.flat {
		s, ok := x.byAddr.Remove(addr)
		return s.pool, ok
	}
	for i := range x.list {
		if s := x.list[i]; s.addr == addr {
			x.list = append(x.list[:i], x.list[i+1:]...)
			return s.pool, true
		}
	}
	return allocator.PoolID{}, false
}
