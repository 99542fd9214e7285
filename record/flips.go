package record

import (
	"cmp"
	"maps"
	"slices"
	"sort"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// maxPoolFlips bounds decidePools' passes of each kind: each costs a
// replay of the device up to its last release.
const maxPoolFlips = 64

// decidePools is findEmptyCaches deciding the private pools too. The
// model infers the pool of an alloc that made a segment when it is made
// (replay's freshPool), and on the legacy default stream, where a
// torch.cuda.MemPool's allocations come between default-pool ones, the
// guess can be wrong: a MemPool's first allocation, which no pool had room
// for, goes to the default pools. It shows later, when an alloc reuses the
// segment and the model, following the wrong pool, puts it elsewhere.
// There decidePools flips the inferred pool of the alloc that made the
// segment (replay.Options.PoolFlips) and decides again, keeping flips that
// take the model further (a search, below), then checks the pools against
// the dump and the final releases. The annotation takes the flips, so that
// every event is written once, with its pool. A recording the model
// follows with no private pool met needs one pass, as before.
func decidePools(conf allocator.Conf, infer inference, limit, total int64, initial []trace.Event, d *torchsnap.Device, lastRelease int64,
	private *privatePools) ([]trace.Event, map[replay.AllocKey]bool, error) {
	rows, end, err := findEmptyCaches(conf, infer, limit, total, initial, d, lastRelease, private, nil)
	if err != nil || !infer.pools || !end.left && len(end.misplaced) == 0 || end.pools == 0 && len(private.addr) == 0 {
		// Followed, or left for another reason than a pool: no private
		// pool was met (garbage collection under a limit the model does
		// not know, say).
		return rows, nil, err
	}
	// The segment the recording reused may be in another pool than the
	// model took it for, or the one the model chose instead. A search, depth
	// first: of the flips that take the model further, the one that goes
	// furthest first, then the others; it ends at a pass that follows the
	// recording, or when the passes are spent, with the furthest found.
	type state struct {
		rows  []trace.Event
		end   passEnd
		flips map[replay.AllocKey]bool
	}
	best, passes := state{rows, end, nil}, 0
	var search func(s state) (bool, error)
	search = func(s state) (bool, error) {
		if !s.end.left {
			return true, nil
		}
		makers, err := segmentMakers(d, s.end.ev.Seq, s.end.ev.Addr, s.end.addr)
		if err != nil {
			return false, err
		}
		var next []state
		for _, key := range makers {
			if s.flips[key] || passes == maxPoolFlips {
				continue
			}
			passes++
			try := maps.Clone(s.flips)
			if try == nil {
				try = map[replay.AllocKey]bool{}
			}
			try[key] = true
			r, e, err := findEmptyCaches(conf, infer, limit, total, initial, d, lastRelease, private, try)
			if err != nil {
				return false, err
			}
			if e.further(s.end) {
				next = append(next, state{r, e, try})
			}
		}
		slices.SortStableFunc(next, func(a, b state) int {
			if a.end.further(b.end) && !b.end.further(a.end) {
				return -1
			}
			if b.end.further(a.end) && !a.end.further(b.end) {
				return 1
			}
			return a.end.pools - b.end.pools
		})
		for _, n := range next {
			if n.end.further(best.end) {
				best = n
			}
			if done, err := search(n); done || err != nil {
				return done, err
			}
		}
		return false, nil
	}
	if _, err := search(best); err != nil {
		return nil, nil, err
	}
	rows, end, flips := best.rows, best.end, best.flips
	// adopt finds the calls again with keys flipped too, and keeps the
	// result where the model still follows the recording to its end with
	// no more misplaced segments than before (fewer, if strict).
	adopt := func(keys []replay.AllocKey, strict bool) (bool, error) {
		try := maps.Clone(flips)
		if try == nil {
			try = map[replay.AllocKey]bool{}
		}
		for _, k := range keys {
			try[k] = true
		}
		r, e, err := findEmptyCaches(conf, infer, limit, total, initial, d, lastRelease, private, try)
		if err != nil {
			return false, err
		}
		more := len(e.misplaced) - len(end.misplaced)
		if e.left || more > 0 || strict && more == 0 {
			return false, nil
		}
		rows, end, flips = r, e, try
		return true, nil
	}
	// Followed to the end, with the labels of two pools swapped: with
	// expandable segments a MemPool's first reservation, inferred to the
	// default pools, makes the default pools' look like a new pool's, and
	// nothing contradicts it until the dump. The pool's first allocation
	// on a stream came after one inferred to the default pools that made
	// a segment: flipping that one gives both their pools.
	for tries := 0; !end.left && len(end.misplaced) > 0 && tries < maxPoolFlips; tries++ {
		key, ok := swapCandidate(end.fresh, end.misplaced[0], flips)
		if !ok {
			break
		}
		if ok, err := adopt([]replay.AllocKey{key}, true); err != nil {
			return nil, nil, err
		} else if !ok {
			break
		}
	}
	// A default-pool segment released between two of a private pool's in
	// one run of releases was the pool's: a MemPool's destruction
	// releases its segments before the empty_cache() after it releases
	// the default pools'.
	for tries := 0; !end.left && tries < maxPoolFlips; tries++ {
		keys, err := sandwiched(d, end.fresh, flips)
		if err != nil {
			return nil, nil, err
		}
		if len(keys) == 0 {
			break
		}
		if ok, err := adopt(keys, false); err != nil {
			return nil, nil, err
		} else if !ok {
			break
		}
	}
	// Default-pool releases that end a run in the order of a MemPool's
	// release before them were the pool's too (poolTails); the call that
	// took them for the default pools' is kept.
	var calls []trace.Event
	for tries := 0; !end.left && tries < maxPoolFlips; tries++ {
		keys, c, err := poolTails(d, end.fresh, flips)
		if err != nil {
			return nil, nil, err
		}
		if len(keys) == 0 {
			break
		}
		if ok, err := adopt(keys, false); err != nil {
			return nil, nil, err
		} else if !ok {
			break
		}
		calls = append(calls, c...)
	}
	return mergeRows(rows, calls), flips, nil
}

// mergeRows merges the empty_cache rows calls into rows, both by Seq; a
// call goes before a row at its place (it came first: a row is made at
// the first release of its run).
func mergeRows(rows, calls []trace.Event) []trace.Event {
	if len(calls) == 0 {
		return rows
	}
	slices.SortStableFunc(calls, func(a, b trace.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	out := make([]trace.Event, 0, len(rows)+len(calls))
	i := 0
	for _, c := range calls {
		for i < len(rows) && rows[i].Seq < c.Seq {
			out = append(out, rows[i])
			i++
		}
		out = append(out, c)
	}
	return append(out, rows[i:]...)
}

// sandwiched returns the allocs of fresh, not yet flipped, inferred to the
// default pools, whose segments d releases between two segments of one
// private pool in a run of segment_free events.
func sandwiched(d *torchsnap.Device, fresh []replay.FreshAlloc, flips map[replay.AllocKey]bool) ([]replay.AllocKey, error) {
	type release struct {
		key  replay.AllocKey
		pool allocator.PoolID
	}
	made := freshMaker(fresh)
	maker := func(ev *trace.Event) (release, bool) {
		f, ok := made(ev)
		return release{f.Key, f.Pool}, ok
	}
	var out []replay.AllocKey
	var run []release
	// settle takes, in a run of releases, each default-pool one released
	// after some private pool's release and before another of that pool:
	// past a private pool's last release in the run nothing is between.
	last := map[allocator.PoolID]int{}
	settle := func() {
		clear(last)
		for j, r := range run {
			last[r.pool] = j
		}
		if countScans {
			scanWork.Add(int64(2 * len(run)))
		}
		reach := -1 // the latest last release of a private pool released before j
		for j, r := range run {
			if r.pool.IsDefault() && !flips[r.key] && reach > j {
				out = append(out, r.key)
			}
			if !r.pool.IsDefault() {
				reach = max(reach, last[r.pool])
			}
		}
		run = run[:0]
	}
	buf := make([]trace.Event, torchsnap.ChunkSize)
	for lo := int64(0); lo < d.Len(); lo += torchsnap.ChunkSize {
		evs, err := d.Chunk(lo, min(d.Len(), lo+torchsnap.ChunkSize), buf)
		if err != nil {
			return nil, err
		}
		for i := range evs {
			if evs[i].Kind != trace.KindSegmentFree {
				settle()
				continue
			}
			if r, ok := maker(&evs[i]); ok {
				run = append(run, r)
			}
		}
	}
	settle()
	return out, nil
}

// freshMaker returns a function that finds the last alloc of fresh that
// made a segment at a release's address at or before it: fresh's indices
// at each address, searched by time where their times do not decrease
// (else scanned from the end), so that each release costs O(log n), not a
// scan of all of fresh.
func freshMaker(fresh []replay.FreshAlloc) func(ev *trace.Event) (replay.FreshAlloc, bool) {
	at := map[uint64][]int{}
	unsorted := map[uint64]bool{}
	for i, f := range fresh {
		l := at[f.Key.Addr]
		if len(l) > 0 && fresh[l[len(l)-1]].Key.TimeUs > f.Key.TimeUs {
			unsorted[f.Key.Addr] = true
		}
		at[f.Key.Addr] = append(l, i)
	}
	return func(ev *trace.Event) (replay.FreshAlloc, bool) {
		l := at[ev.Addr]
		j := len(l) - 1
		if !unsorted[ev.Addr] {
			j = sort.Search(len(l), func(k int) bool {
				if countScans {
					scanWork.Add(1)
				}
				return fresh[l[k]].Key.TimeUs > ev.TimeUs
			}) - 1
		}
		for ; j >= 0; j-- {
			if countScans {
				scanWork.Add(1)
			}
			if f := fresh[l[j]]; f.Key.TimeUs <= ev.TimeUs {
				return f, true
			}
		}
		return replay.FreshAlloc{}, false
	}
}

// poolTails returns the allocs of fresh, not yet flipped, inferred to the
// default pools, whose segments d releases at the end of a run of
// segment_free events, after a MemPool's last release there and each in
// the order of the pool's own release, (stream, size, address): the
// pool's. Its destruction releases its segments (small, then large, each
// in that order), and an empty_cache() after it would release the default
// pools' large segments and then their small ones in an order of their
// own. Garbage collection may have released the default pools' room
// that would have told the pool's allocation from theirs when it was made
// (replay's freshPool). calls are the empty_cache rows, of no bytes, that
// keep the call the run showed when those releases were taken for the
// default pools': a torch.cuda.empty_cache() after the pool's destruction
// that found nothing to release, as a program that drops a MemPool makes.
// Each goes right after its run.
func poolTails(d *torchsnap.Device, fresh []replay.FreshAlloc, flips map[replay.AllocKey]bool) (keys []replay.AllocKey, calls []trace.Event, err error) {
	made := freshMaker(fresh)
	type release struct {
		f  replay.FreshAlloc
		ev trace.Event
	}
	var run []release
	settle := func() {
		k := -1 // the pool's last release
		for j := range run {
			if !run[j].f.Pool.IsDefault() {
				k = j
			}
		}
		if k < 0 || k == len(run)-1 || run[k].f.Pool.A != 0 {
			run = run[:0]
			return
		}
		for j := k + 1; j < len(run); j++ {
			a, b := &run[j-1].ev, &run[j].ev
			inOrder := b.Stream > a.Stream || b.Stream == a.Stream && (b.Size > a.Size || b.Size == a.Size && b.Addr > a.Addr)
			if flips[run[j].f.Key] || !inOrder {
				run = run[:0]
				return
			}
		}
		for _, r := range run[k+1:] {
			keys = append(keys, r.f.Key)
		}
		last := &run[len(run)-1].ev
		calls = append(calls, trace.Event{Seq: last.Seq + 1, TimeUs: last.TimeUs, Device: d.Index, Kind: trace.KindEmptyCache, Stack: trace.NoStack})
		run = run[:0]
	}
	buf := make([]trace.Event, torchsnap.ChunkSize)
	for lo := int64(0); lo < d.Len(); lo += torchsnap.ChunkSize {
		evs, err := d.Chunk(lo, min(d.Len(), lo+torchsnap.ChunkSize), buf)
		if err != nil {
			return nil, nil, err
		}
		for i := range evs {
			if evs[i].Kind != trace.KindSegmentFree {
				settle()
				continue
			}
			if f, ok := made(&evs[i]); ok {
				run = append(run, release{f, evs[i]})
			}
		}
	}
	settle()
	return keys, calls, nil
}

// swapCandidate returns the first alloc of fresh, not yet flipped, that
// made a segment in the default pools on the stream of private pool p's
// first one, before it.
func swapCandidate(fresh []replay.FreshAlloc, p allocator.PoolID, flips map[replay.AllocKey]bool) (replay.AllocKey, bool) {
	first := slices.IndexFunc(fresh, func(f replay.FreshAlloc) bool { return f.Pool == p })
	if first < 0 {
		return replay.AllocKey{}, false
	}
	for _, f := range fresh[:first] {
		if f.Pool.IsDefault() && f.Stream == fresh[first].Stream && !flips[f.Key] {
			return f.Key, true
		}
	}
	return replay.AllocKey{}, false
}

// passEnd is how a pass of findEmptyCaches ended: left, where the model
// left the recording, at the recorded event ev, which it put at addr (0:
// it could not make it, or satisfied a recorded OOM); pools, the private
// pools it invented.
type passEnd struct {
	left  bool
	ev    trace.Event
	addr  uint64
	pools int
	// fresh are the allocs that made segments, with their pools;
	// misplaced, for a pass that replayed the whole recording, the
	// private pools holding segments the dump says are the default
	// pools' (one per segment).
	fresh     []replay.FreshAlloc
	misplaced []allocator.PoolID
}

// further reports whether e followed the recording further than f: to
// its end, to a later event, or to the same one placed elsewhere (a
// flip that moves the model's choice is progress).
func (e passEnd) further(f passEnd) bool {
	switch {
	case !e.left || !f.left:
		return !e.left && f.left
	case e.ev.Seq != f.ev.Seq:
		return e.ev.Seq > f.ev.Seq
	}
	return e.addr != f.addr
}

// segmentMakers returns, for each of addrs, the recorded alloc that made
// the recorded segment holding it just before d's event seq: the alloc
// right after the segment's segment_alloc. An address that no recorded
// segment holds (a reconstructed one, an expandable segment's mapping)
// has none.
func segmentMakers(d *torchsnap.Device, seq int64, addrs ...uint64) ([]replay.AllocKey, error) {
	type seg struct {
		end   uint64
		maker replay.AllocKey
	}
	segs := make(map[uint64]seg) // the live segments by address: a free finds its own at once
	var buf []trace.Event
	var fresh uint64 // the segment the last event allocated, if any
	hasFresh := false
	for lo := int64(0); lo < seq && lo < d.Len(); lo += torchsnap.ChunkSize {
		hi := min(d.Len(), lo+torchsnap.ChunkSize, seq)
		if buf == nil {
			buf = make([]trace.Event, torchsnap.ChunkSize)
		}
		evs, err := d.Chunk(lo, hi, buf)
		if err != nil {
			return nil, err
		}
		for i := range evs {
			ev := &evs[i]
			switch ev.Kind {
			case trace.KindSegmentAlloc:
				segs[ev.Addr] = seg{end: ev.Addr + uint64(ev.Size)}
				fresh, hasFresh = ev.Addr, true
				continue
			case trace.KindSegmentFree:
				delete(segs, ev.Addr)
			case trace.KindAlloc:
				if s, ok := segs[fresh]; hasFresh && ok && fresh == ev.Addr {
					s.maker = replay.AllocKey{TimeUs: ev.TimeUs, Addr: ev.Addr}
					segs[fresh] = s
				}
			}
			hasFresh = false
		}
	}
	// Live segments do not overlap, so an address lies in at most one; a
	// trace where they do gets its makers in address order, not the map's.
	var out []replay.AllocKey
	var holders []uint64
	for _, a := range addrs {
		holders = holders[:0]
		for addr, s := range segs {
			if a >= addr && a < s.end && s.maker != (replay.AllocKey{}) {
				holders = append(holders, addr)
			}
		}
		slices.Sort(holders)
		for _, addr := range holders {
			if m := segs[addr].maker; !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out, nil
}
