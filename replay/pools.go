package replay

import (
	"cmp"
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
	"slices"
)

// Private pools (CUDA graphs, torch.cuda.MemPool) in a replay.
//
// torch 2.11's trace entries carry no pool id, and a snapshot names the pool
// only of the segments alive at the dump. The import's annotation pass (a
// Recorded replay, Annotate, InferPools) therefore infers the pool of every recorded
// allocation from what the recording shows, and writes it into the event
// (Event.Pool), which later replays under other settings follow:
//
//   - an allocation inside a recorded segment that a private-pool allocation
//     created belongs to that pool (a segment has one owner);
//   - an allocation that made a new segment although the pool its stream
//     used last had a fitting cached block was served by another pool: a new
//     one (PyTorch takes the best fit of the pool a request is routed to, so
//     it would have used the block). A pool first met on stream 0 is a
//     MemPool (use_mem_pool); elsewhere a CUDA graph capture, which never
//     runs on the legacy default stream. On stream 0 such an allocation
//     goes to a MemPool met before that had no room, and one that the
//     default pools had no room for goes to them (freshPool);
//   - right after torch.cuda.graph's empty_cache() and capture_begin's two
//     8-byte allocations in the default pools (sinceCall.prologue), an
//     allocation that made a segment is a new graph pool's; and when the
//     capture goes on in a pool the trace names, the new pool was that one
//     (DeviceResult.Aliases: the import replays again with Options.PoolAliases);
//   - a new MemPool takes the id the snapshot names (Options.NamedPools)
//     that is the next in PyTorch's numbering, if no alloc has had it: the
//     dump names a pool whose early segments were released before it;
//   - a recorded OOM failed in the pool its stream allocated from last if
//     that private pool had no room: inside use_mem_pool or a capture
//     PyTorch frees no cache before it fails (oomPool);
//   - tracer import corrects the guesses that the rest of the recording
//     contradicts (Options.PoolFlips, record's decidePools).
//
// The recorded segment_free of a private segment is tagged with its pool
// too: the empty_cache() that freed it shows the pool's graphs or MemPool
// were gone by then, so a replay releases the pool (releasePool) before
// replaying that empty_cache, which then returns the pool's free segments as
// PyTorch's does (release_cached_blocks, §7.3, §15).

// poolRoute is a deviceReplay's private-pool state.
type poolRoute struct {
	seen map[allocator.PoolID]bool
	// met are the MemPools given to a recorded alloc, annotating
	// (unmetMemPool, which asks of MemPools only: a recording of a graph
	// a segment would make it a map of every pool); named are the MemPools the snapshot names, by id,
	// made on unmetMemPool's first call, and unmet the first of them that
	// may not have been met.
	met    map[allocator.PoolID]bool
	named  []allocator.PoolID
	unmet  int
	listed bool

	// The annotation pass's inference: fresh is the recorded segment_alloc
	// right before the alloc being replayed (size 0: none); segs are the
	// recorded segments that private-pool allocations created, live;
	// last is the pool of each stream's latest allocation; made counts the
	// pools invented.
	fresh allocator.SegmentInfo
	segs  segIndex
	last  map[uint64]allocator.PoolID
	made  uint64
	ix    memIndex // the MemPools met, in order (poolindex.go)
}

// AllocKey names a recorded alloc in every pass over a recording, whose
// Seqs differ where rows are inserted: its time and address.
type AllocKey struct {
	TimeUs int64
	Addr   uint64
}

// Invented pool ids carry this bit, in A for a graph pool and in B for a
// MemPool, so that they never meet an id a snapshot names.
const inventedPool = 1 << 63

// routed reports whether an alloc may need more than the default pools:
// Options.PrivateSegments names some, or the annotation is inferring pools.
func (r *deviceReplay) routed() bool {
	return len(r.private) > 0 || r.pools.fresh.Size != 0 || r.pools.segs.Len() != 0 || r.pools.made != 0
}

// privatePool reports the private pool whose segment holds the recorded
// address addr, if Options.PrivateSegments names one.
func (r *deviceReplay) privatePool(addr uint64) (allocator.PoolID, bool) {
	for i := range r.private {
		s := &r.private[i]
		if addr >= s.Addr && addr < s.Addr+uint64(s.Size) {
			return s.Pool, true
		}
	}
	return allocator.PoolID{}, false
}

// allocPool decides the pool of the recorded alloc ev: its tag, a segment
// of Options.PrivateSegments, or, annotating, the inference above (written
// into ev.Pool).
func (r *deviceReplay) allocPool(ev *trace.Event) allocator.PoolID {
	if !ev.Pool.IsDefault() {
		return allocator.PoolID{A: ev.Pool.A, B: ev.Pool.B}
	}
	if p, ok := r.privatePool(ev.Addr); ok {
		return p
	}
	if !r.annotate || !r.opts.InferPools {
		return allocator.PoolID{}
	}
	p := r.inferPool(ev)
	ev.Pool = trace.PoolID{A: p.A, B: p.B}
	return p
}

// oomPool decides the pool of the recorded OOM ev: its tag or, annotating,
// the graph pool whose episode is under way on its stream (a capture, or a
// CUDA graph trees' warm-up, that ran out of memory), else the pool its
// stream allocated from last, if that private pool is in use and had no
// room for it; written into ev.Pool. Inside use_mem_pool or a capture a
// request fails in the private pool, where PyTorch frees no cache first
// and counts no retry (captures are underway, §4); the trace names no
// pool, and the default pools may well have had a block for it.
func (r *deviceReplay) oomPool(ev *trace.Event) allocator.PoolID {
	if !ev.Pool.IsDefault() {
		return allocator.PoolID{A: ev.Pool.A, B: ev.Pool.B}
	}
	if !r.annotate || !r.opts.InferPools {
		return allocator.PoolID{}
	}
	if r.caps.capturing() && r.caps.stream == ev.Stream {
		ev.Pool = trace.PoolID{A: r.caps.open.A, B: r.caps.open.B}
		return r.caps.open
	}
	p := r.pools.last[ev.Stream]
	if p.IsDefault() || !r.a.InUse(p) || r.room(p, ev, r.a.Conf().ExpandableSegments) {
		return allocator.PoolID{}
	}
	ev.Pool = trace.PoolID{A: p.A, B: p.B}
	return p
}

// inferPool is allocPool's inference for the recorded alloc ev.
func (r *deviceReplay) inferPool(ev *trace.Event) allocator.PoolID {
	f := &r.pools.fresh
	if f.Expandable {
		// With expandable segments the request mapped pages: into a
		// segment the model knows (whose pool it is), or into a new
		// reservation, which a pool makes only when it has none for the
		// stream.
		if p, ok := r.a.ExpandableOwner(f.Addr); ok {
			return p
		}
	} else if f.Size == 0 || f.Addr != ev.Addr {
		if p, ok := r.a.ExpandableOwner(ev.Addr); ok {
			return p
		}
		p, _ := r.pools.segs.contains(ev.Addr)
		return p
	}
	key := AllocKey{TimeUs: ev.TimeUs, Addr: ev.Addr}
	p := r.freshPool(ev, f.Expandable)
	if r.opts.PoolFlips[key] {
		if p.IsDefault() {
			p = r.otherPool(ev, f.Expandable, p)
		} else {
			p = allocator.PoolID{}
		}
	}
	r.res.Fresh = append(r.res.Fresh, FreshAlloc{Key: key, Pool: p, Stream: ev.Stream})
	return p
}

// FreshAlloc is a recorded alloc that made a segment (or an expandable
// reservation) and the pool InferPools gave it.
type FreshAlloc struct {
	Key    AllocKey
	Pool   allocator.PoolID
	Stream uint64
}

// room reports whether pool p could have served the recorded alloc ev
// without a new segment (or, expandable, without a new reservation).
func (r *deviceReplay) room(p allocator.PoolID, ev *trace.Event, expandable bool) bool {
	return r.a.Fits(p, ev.Size, ev.Stream) || expandable && r.a.HasExpandable(p, ev.Size, ev.Stream)
}

// isMemPool reports whether p is a torch.cuda.MemPool's id, which PyTorch
// numbers (0, n); a CUDA graph's pool is (n, 0), or (0, n) too when
// torch.cuda.graph_pool_handle() made it (isGraphPool).
func isMemPool(p allocator.PoolID) bool { return p.A == 0 && p.B != 0 }

// freshPool infers the pool of the recorded alloc ev that made a new
// segment: the pool its stream used last, unless that pool had room.
// On the legacy default stream, where a MemPool (use_mem_pool) takes
// allocations between default-pool ones, a request the default pools had
// no room for is theirs rather than the MemPool's: a program allocates
// mostly outside a MemPool, and a wrong guess is found by a later reuse
// (PoolFlips). One that the default pools had room for goes to a MemPool
// met before that had none, else to a new pool.
func (r *deviceReplay) freshPool(ev *trace.Event, expandable bool) allocator.PoolID {
	cand := r.pools.last[ev.Stream]
	if !cand.IsDefault() && !r.a.InUse(cand) {
		cand = allocator.PoolID{} // released: its graphs are gone
	}
	if r.called.prologue(ev) {
		// A process's first capture, whose first request needed a new
		// segment: the default pools, which the stream used last, had
		// just been emptied by torch.cuda.graph.
		return r.otherPool(ev, expandable, cand)
	}
	if ev.Stream == 0 && isMemPool(cand) && !r.room(allocator.PoolID{}, ev, expandable) {
		return allocator.PoolID{}
	}
	if !r.room(cand, ev, expandable) {
		return cand
	}
	return r.otherPool(ev, expandable, cand)
}

// otherPool is the private pool of the recorded alloc ev when it was not
// served by pool not: on stream 0 a MemPool met before that had no room,
// else a new pool, a MemPool on stream 0 and a graph's elsewhere.
func (r *deviceReplay) otherPool(ev *trace.Event, expandable bool, not allocator.PoolID) allocator.PoolID {
	if ev.Stream == 0 {
		if m, ok := r.noRoomMemPool(ev, expandable, not); ok {
			if checkMemIndex && m != r.scanMemPools(ev, expandable, not) {
				panic("replay: the MemPool index and the scan disagree")
			}
			if !m.IsDefault() {
				return m
			}
		} else if m := r.scanMemPools(ev, expandable, not); !m.IsDefault() {
			return m
		}
	}
	if ev.Stream == 0 {
		if m, ok := r.unmetMemPool(); ok {
			return m
		}
	}
	r.pools.made++
	r.res.InferredPools++
	if ev.Stream == 0 {
		return allocator.PoolID{B: inventedPool | r.pools.made}
	}
	p := allocator.PoolID{A: inventedPool | r.pools.made}
	if q, ok := r.opts.PoolAliases[p]; ok {
		return q
	}
	return p
}

// unmetMemPool is the MemPool that otherPool's new pool on stream 0 is,
// where the snapshot names one (Options.PrivateSegments, NamedPools) that
// no recorded alloc has had yet and whose id is the next in PyTorch's
// numbering (its ids (0, b) below have all been met): PyTorch numbers the
// pools as it makes them, and the dump names a pool whose early segments
// were released before it; a pool made earlier, which died before the
// dump, is not the one it names. A pool would otherwise have two ids, and
// its release at its destruction (emptyCaches) would be taken for two.
func (r *deviceReplay) unmetMemPool() (allocator.PoolID, bool) {
	ps := &r.pools
	if !ps.listed {
		ps.listed = true
		for i := range r.private {
			if p := r.private[i].Pool; isMemPool(p) {
				ps.named = append(ps.named, p)
			}
		}
		for _, p := range r.opts.NamedPools {
			if isMemPool(p) {
				ps.named = append(ps.named, p)
			}
		}
		slices.SortFunc(ps.named, func(x, y allocator.PoolID) int { return cmp.Compare(x.B, y.B) })
		ps.named = slices.Compact(ps.named)
	}
	// met only grows: the cursor passes each named pool once.
	for ps.unmet < len(ps.named) && ps.met[ps.named[ps.unmet]] {
		ps.unmet++
	}
	if ps.unmet == len(ps.named) {
		return allocator.PoolID{}, false
	}
	best := ps.named[ps.unmet]
	if best.B > 64 {
		return allocator.PoolID{}, false
	}
	for b := uint64(1); b < best.B; b++ {
		if !ps.met[allocator.PoolID{B: b}] {
			return allocator.PoolID{}, false
		}
	}
	return best, true
}

// scanMemPools is otherPool's search on stream 0 where the index cannot
// answer: the first MemPool met, other than not, in use and without room
// for ev; (0, 0) if none.
func (r *deviceReplay) scanMemPools(ev *trace.Event, expandable bool, not allocator.PoolID) allocator.PoolID {
	for _, m := range r.pools.ix.pools {
		if countVisits {
			noRoomVisits.Add(1)
		}
		if m != not && r.a.InUse(m) && !r.room(m, ev, expandable) {
			return m
		}
	}
	return allocator.PoolID{}
}

// allocated notes, annotating, that the recorded alloc ev went to pool p:
// the stream's latest pool, and the owner of the segment it made, if any.
func (r *deviceReplay) allocated(ev *trace.Event, p allocator.PoolID) {
	if !r.annotate || !r.opts.InferPools {
		return
	}
	if r.pools.last == nil {
		r.pools.last = map[uint64]allocator.PoolID{}
	}
	r.pools.last[ev.Stream] = p
	if isMemPool(p) && (len(r.private) > 0 || len(r.opts.NamedPools) > 0) {
		if r.pools.met == nil {
			r.pools.met = map[allocator.PoolID]bool{}
		}
		r.pools.met[p] = true
	}
	if isMemPool(p) && !r.pools.ix.has(p) {
		if len(r.pools.ix.pools) == 0 && !r.recorded && r.obs == nil {
			r.a.SetObserver(poolWatch{r}) // else emitted marks the pools
		}
		r.pools.ix.add(p)
	}
	if f := r.pools.fresh; f.Size != 0 && !f.Expandable && f.Addr == ev.Addr && !p.IsDefault() {
		f.Pool = p
		r.pools.segs.add(f)
	}
	r.pools.fresh = allocator.SegmentInfo{}
}

// segmentFreed tags, annotating, the recorded segment_free or
// segment_unmap ev with the pool of the segment it frees.
func (r *deviceReplay) segmentFreed(ev *trace.Event) {
	if !r.annotate || !r.opts.InferPools || !ev.Pool.IsDefault() {
		return
	}
	if ev.Kind == trace.KindSegmentUnmap {
		if p, ok := r.a.ExpandableOwner(ev.Addr); ok {
			ev.Pool = trace.PoolID{A: p.A, B: p.B}
		}
		return
	}
	if p, ok := r.pools.segs.take(ev.Addr); ok {
		ev.Pool = trace.PoolID{A: p.A, B: p.B}
	}
}

// emptyCaches makes the flushes of one empty_cache call, stated by a row or
// inferred from a run of releases; rel are the recorded releases that
// followed it (with rows, those between the row and the next request).
// Releases that begin with a MemPool's segments are first that pool's own
// empty_cache, which its destruction runs (releasePool, then EmptyPoolCache
// of its id: a default flush would have come first); the rest is a
// torch.cuda.empty_cache(). Every private pool whose segments a call frees
// was released before it (its graphs or MemPool were destroyed), so the
// replay drops the use it holds first, and EmptyCache returns the pool's
// free segments.
//
// With rows the recorded releases are outcomes, but they are still read
// here, rather than pool releases decided at import and stored: they are in
// every trace whatever the replay's settings, the import tags them with
// their pools (segmentFreed), and a row is performed at the next request,
// after them; the trace format needs nothing new.
func (r *deviceReplay) emptyCaches(rel []trace.Event) error {
	if len(rel) > 0 {
		if p := (allocator.PoolID{A: rel[0].Pool.A, B: rel[0].Pool.B}); p.A == 0 && p.B != 0 {
			n := 1
			for n < len(rel) && rel[n].Pool == rel[0].Pool {
				n++
			}
			r.releasePool(p)
			r.res.EmptyCaches++
			r.called.call()
			if err := r.a.EmptyPoolCache(p); err != nil {
				return err
			}
			if rel = rel[n:]; len(rel) == 0 {
				return nil
			}
		}
	}
	for i := range rel {
		if p := rel[i].Pool; !p.IsDefault() {
			r.releasePool(allocator.PoolID{A: p.A, B: p.B})
		}
	}
	r.res.EmptyCaches++
	r.called.call()
	return r.a.EmptyCache()
}

// releasePool drops the use the replay holds of private pool p, if any.
func (r *deviceReplay) releasePool(p allocator.PoolID) {
	if r.a.InUse(p) {
		r.a.ReleasePool(p)
		delete(r.pools.seen, p)
		r.pools.ix.touched(p)
	}
}

// beginPool routes the next malloc on stream to private pool id. The pool is
// created, and kept in use, on its first appearance; a CUDA graph's pool
// (isGraphPool) after the empty_cache() with which torch.cuda.graph starts
// a capture (use_mem_pool, a MemPool's, empties nothing), unless emptied
// says the replay has just made that call (an empty_cache row, or
// releases it attributed to one: sinceCall.before). first reports a first
// appearance.
func (r *deviceReplay) beginPool(id allocator.PoolID, stream uint64, emptied bool) (first bool, err error) {
	filter := func(s uint64) bool { return s == stream }
	r.pools.ix.touched(id)
	if r.pools.seen == nil {
		r.pools.seen = map[allocator.PoolID]bool{}
	}
	if !r.pools.seen[id] {
		r.pools.seen[id] = true
		if isGraphPool(id, stream) && !emptied {
			r.res.EmptyCaches++
			if err := r.a.EmptyCache(); err != nil {
				return true, err
			}
		}
		r.a.BeginAllocateToPool(id, filter)
		return true, nil
	}
	r.a.BeginAllocateToPool(id, filter)
	r.a.ReleasePool(id) // keep one use, held since the first appearance
	return false, nil
}
