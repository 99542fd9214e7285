package torchsnap

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tracer-dev/tracer/internal/addrmap"
	"github.com/tracer-dev/tracer/trace"
)

// ValidateParts is ValidateReserved on up to parts goroutines, with the
// same result: the block events are split by address (partOf), each part
// keeping its own table of live blocks and its own copy of the segments,
// whose events every part replays; the parts' problems are then joined in
// the order one pass finds them. A spilled trace is read back once for
// all of its parts (readShared); it, and a trace whose packed records are
// in a scratch file (a file decoded in memory, up to 64 MiB), get fewer
// parts (spillParts): each part of a small table reads every event, on a
// core the annotation beside it needs.
// each, if not nil, is called on each part's goroutine as it starts, with
// the part's number, and the func it returns as the part ends (to measure
// the parts).
func (d *Device) ValidateParts(more int64, parts int, each func(part int) func()) []Problem {
	st, err := d.startState()
	if err != nil {
		v := &validator{dev: d.Index, byKind: map[string]int{}}
		v.add("trace that could not be read back ("+err.Error()+")", -1, 0)
		return v.list
	}
	blocks := len(st.live) + int(max(0, min(more, d.Len())))
	if d.sp != nil || d.rf != nil {
		parts = spillParts(blocks, max(1, parts))
	} else {
		parts = partsFor(blocks, max(1, parts))
	}
	// A spill's chunks are read once for every part. Packed records in a
	// scratch file are read by each part, on its own core: one reader for
	// all put the validation of a mid-size import in memory after its
	// annotation, on the import's critical path.
	var shared []chan *sharedChunk
	if d.sp != nil && parts > 1 {
		shared = readShared(d, parts)
	}
	// Whether the final state's blocks are in order, read beside the parts.
	inOrder := make(chan bool, 1)
	go func() { inOrder <- liveInOrder(d) }()
	vs := make([]*validator, parts)
	for p := range vs {
		v := &validator{dev: d.Index, byKind: map[string]int{}, part: p, parts: parts, fw: &startState{segs: st.segs}}
		if p > 0 {
			v.fw.segs = st.segs.clone()
		}
		vs[p] = v
	}
	// Each part's position; the events before the least go back (validatedTo).
	done := make([]atomic.Int64, parts)
	progress := func(p int, hi int64) {
		done[p].Store(hi)
		least := hi
		for q := range done {
			least = min(least, done[q].Load())
		}
		d.validatedTo(least)
	}
	failed := make([]error, parts)
	var wg sync.WaitGroup
	for p, v := range vs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if each != nil {
				defer each(p)()
			}
			// The start state's blocks of the part (st.live is only read).
			// A table of 1 MiB or more has its pages made in one call, not
			// a fault a page: the hash spreads the blocks over all of them.
			reserve := partBlocks(blocks, parts)
			v.live.Reserve(reserve)
			if addrmap.Slots(reserve) >= bigParts {
				v.live.Pages().Populate(0, math.MaxInt)
				populatedTables.Add(1)
			}
			for _, b := range st.live {
				if parts == 1 || partOf(b.addr, parts) == p {
					v.live.Put(b.addr, liveRec{pending: b.pending})
				}
			}
			v.live.All(v.track)
			var buf []trace.Event
			if shared == nil {
				buf = d.chunkBuf()
			}
			for lo := int64(0); lo < d.Len(); lo += ChunkSize {
				var evs []trace.Event
				var err error
				var c *sharedChunk
				if shared != nil {
					c = <-shared[p]
					evs, err = c.evs, c.err
				} else {
					evs, err = d.Chunk(lo, min(d.Len(), lo+ChunkSize), buf)
				}
				if err != nil {
					failed[p] = err
					return
				}
				if p == 0 {
					for i := range evs {
						v.kinds[evs[i].Kind&kindMask]++
					}
				}
				v.events(evs, int(lo))
				if c != nil {
					c.release()
				}
				progress(p, lo+int64(len(evs)))
			}
		}()
	}
	wg.Wait()
	for _, err := range failed {
		if err != nil {
			// Only a file's reads fail (a spill's or a scratch file's
			// records), and every part stops at the chunk that failed:
			// the problems found before it, then why.
			v := mergeParts(vs)
			v.add("trace that could not be read back ("+err.Error()+")", -1, 0)
			return v.list
		}
	}
	v := mergeParts(vs)
	in := <-inOrder
	if ps, ok := v.finalByLookup(d, vs, in); ok {
		return ps
	}
	// Each part's blocks live after the trace, sorted by address, on a
	// goroutine each, for finalParts.
	for _, p := range vs {
		wg.Go(func() {
			p.after = make([]addrPending, 0, p.live.Len())
			p.live.All(func(a uint64, r *liveRec) { p.after = append(p.after, addrPending{a, r.pending}) })
			p.live = addrmap.Map[liveRec]{}
			sortByAddr(p.after)
		})
	}
	wg.Wait()
	return v.finalParts(d, vs, in)
}

// lookupFinalMax is the most blocks live after the trace whose check
// against the final state finalByLookup makes, on one goroutine; more
// are checked by finalParts, in ranges on several.
const lookupFinalMax = 1 << 17

// Tests: noFinalLookup makes finalByLookup leave every check to
// finalParts; finalLookups counts the checks it made, populatedTables the
// parts' tables made resident at once.
var (
	noFinalLookup   bool
	finalLookups    atomic.Int64
	populatedTables atomic.Int64
)

// finalByLookup is v.final where no block live after the trace is missing
// from the final state, the usual case: it walks the final state's live
// blocks in address order and looks each up in its part's table, instead
// of listing and sorting every part's blocks to walk beside them (the
// validation's longest step after its events). It finds the same problems
// in the same order: those of pending states, then the final state's
// blocks missing, each by address. ok is false, and nothing is changed, where a
// part holds a block the final state lacks (every block found counts one
// of the parts' entries) or there are more than lookupFinalMax blocks.
func (v *validator) finalByLookup(d *Device, vs []*validator, inOrder bool) (ps []Problem, ok bool) {
	live := 0
	for _, p := range vs {
		live += p.live.Len()
	}
	if live > lookupFinalMax || noFinalLookup {
		return nil, false
	}
	found := 0
	var differs, missing []uint64
	finalLive(d, inOrder, func(w addrPending) {
		r, ok := vs[partOf(w.addr, len(vs))].live.Get(w.addr)
		switch {
		case !ok:
			missing = append(missing, w.addr)
		case r.pending != w.pending:
			differs = append(differs, w.addr)
			found++
		default:
			found++
		}
	})
	if found != live {
		return nil, false
	}
	for _, a := range differs {
		v.add("block pending state differs from the final state", -1, a)
	}
	for _, a := range missing {
		v.add(missingKind, -1, a)
	}
	finalLookups.Add(1)
	return v.skipped(), true
}

// spillParts is how many of parts validate a spilled trace with up to
// blocks blocks live at once: as many whose tables take together no more
// than one table of them all (or bigParts slots, 1 MiB), where
// partsFor allows a quarter more: a spilled import is one whose memory
// counts. Its chunks are read once for them all (readShared), so the
// parts cost the cores they run on, not another read of the trace each.
// A table under bigParts slots gets one part: it stays in the cache of
// the core that validates, so parts would split no misses, while each
// part still reads every event and wakes for every chunk, on cores the
// annotation beside it needs.
func spillParts(blocks, parts int) int {
	one := addrmap.Slots(blocks)
	if one < onePartSlots {
		return 1
	}
	for parts > 1 && parts*addrmap.Slots(partBlocks(blocks, parts)) > max(one, bigParts) {
		parts--
	}
	return parts
}

// sharedChunk is a chunk of a spilled trace read once for every part of a
// validation (readShared): its buffer goes back once the last part is
// done with it.
type sharedChunk struct {
	evs  []trace.Event
	err  error
	left atomic.Int32 // the parts not done with it
	free chan<- []trace.Event
}

// release tells that a part is done with c.
func (c *sharedChunk) release() {
	if c.left.Add(-1) == 0 {
		c.free <- c.evs[:cap(c.evs)]
	}
}

// sharedChunks is how many chunk buffers readShared fills ahead of the
// slowest part: two, so that the next chunk is read while the parts
// validate one (at the import's peak, each more costs 90 KB).
const sharedChunks = 2

// readShared reads d's chunks in order on a goroutine of its own and hands
// each to every one of parts parts, on the part's channel; a read error
// goes to every part in place of the chunk, and ends the reading.
func readShared(d *Device, parts int) []chan *sharedChunk {
	free := make(chan []trace.Event, sharedChunks)
	for range sharedChunks {
		free <- make([]trace.Event, ChunkSize)
	}
	out := make([]chan *sharedChunk, parts)
	for p := range out {
		out[p] = make(chan *sharedChunk, sharedChunks+1)
	}
	// The length is read here: once the parts have the last chunk, the
	// device may be closed (an import's last reader closes its file).
	n := d.Len()
	go func() {
		for lo := int64(0); lo < n; lo += ChunkSize {
			buf := <-free
			evs, err := d.Chunk(lo, min(n, lo+ChunkSize), buf)
			c := &sharedChunk{evs: evs, err: err, free: free}
			c.left.Store(int32(parts))
			for _, ch := range out {
				ch <- c
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// partBlocks is the blocks each of parts parts reserves its table for,
// of blocks live at once: the hash splits them about evenly.
func partBlocks(blocks, parts int) int {
	if parts == 1 {
		return blocks
	}
	return blocks/parts + blocks/parts/8 + 64
}

// partsFor is how many parts, of up to parts, validate a trace with up to
// blocks blocks live at once: the most whose tables of live blocks take
// together at most a quarter more than one table of them all. A table of
// few keys is kept less full than a large one (addrmap), so that 8 parts
// of a trace with 150k blocks live (a 39 MB snapshot) took 8 MiB where 4
// take 4 MiB, as one table does.
// Of those, one fewer while it takes less memory: at the seed's 500k
// blocks, 6 parts take 12 MiB where 8 take 16 (each part's table a power
// of two, the 7th and 8th only add slots).
// Under a table of bigParts slots, the parts are as asked: their
// tables are small whatever their number.
func partsFor(blocks, parts int) int {
	one := addrmap.Slots(blocks)
	if one < bigParts {
		return parts
	}
	best := 1
	for p := 2; p <= parts; p++ {
		if 4*p*addrmap.Slots(partBlocks(blocks, p)) <= 5*one {
			best = p
		}
	}
	for best > 1 && partSlots(blocks, best-1) < partSlots(blocks, best) {
		best--
	}
	return best
}

// partSlots is the slots of the tables of parts parts of blocks blocks.
func partSlots(blocks, parts int) int { return parts * addrmap.Slots(partBlocks(blocks, parts)) }

// bigParts is the least table, in slots (16 bytes each), whose parts
// partsFor weighs.
const bigParts = 1 << 16

// onePartSlots is the least table, in slots, that spillParts splits
// (bigParts; a variable so that tests validate small spills in parts).
var onePartSlots = bigParts

// afterMerge walks the parts' blocks live after the trace, each sorted by
// address, as one list sorted by address, without making it (for
// millions of blocks, a list faulted in page by page on the validation's
// last step).
type afterMerge struct {
	heads [][]addrPending
	k     int // the head with the least address; -1 at the end
}

func mergeAfter(heads [][]addrPending) *afterMerge {
	m := &afterMerge{heads: heads}
	m.pick()
	return m
}

func (m *afterMerge) pick() {
	m.k = -1
	for i, h := range m.heads {
		if len(h) > 0 && (m.k < 0 || h[0].addr < m.heads[m.k][0].addr) {
			m.k = i
		}
	}
}

// more reports whether a block is left; peek is the least left, next
// moves past it.
func (m *afterMerge) more() bool        { return m.k >= 0 }
func (m *afterMerge) peek() addrPending { return m.heads[m.k][0] }
func (m *afterMerge) next() {
	m.heads[m.k] = m.heads[m.k][1:]
	m.pick()
}

func byAddr(a, b addrPending) int { return cmp.Compare(a.addr, b.addr) }

// atAddr orders a block against an address, for a binary search by address.
func atAddr(b addrPending, a uint64) int { return cmp.Compare(b.addr, a) }

// finalParts is v.final on up to len(vs) goroutines, vs being the parts
// of the validation, with the same result: where the final state's live
// blocks are in address order (inOrder, as dumped), its segments are cut
// into ranges of about as many blocks, each range's blocks are checked
// against those of the parts' blocks live after the trace (v.after) in
// its addresses, and the ranges' problems are joined in their order, as
// one walk finds them. The walk of a few million blocks (40 bytes each)
// and the parts' lists after them was the validation's longest step after
// its parts, on one core.
func (v *validator) finalParts(d *Device, vs []*validator, inOrder bool) []Problem {
	heads := make([][]addrPending, len(vs))
	for i, p := range vs {
		heads[i], p.after = p.after, nil
	}
	blocks := 0
	for _, s := range d.Segments {
		blocks += len(s.Blocks)
	}
	ranges := min(len(vs), blocks/finalRangeMin)
	if !inOrder || ranges < 2 {
		return v.final(d, mergeAfter(heads), inOrder)
	}
	rs := cutFinal(d.Segments, blocks, ranges)
	var wg sync.WaitGroup
	for k, r := range rs {
		last := uint64(math.MaxUint64)
		if k+1 < len(rs) {
			last = rs[k+1].lo - 1
		}
		wg.Go(func() {
			sub := make([][]addrPending, len(heads))
			for i, h := range heads {
				from, _ := slices.BinarySearchFunc(h, r.lo, atAddr)
				to := len(h)
				if last < math.MaxUint64 {
					to, _ = slices.BinarySearchFunc(h, last+1, atAddr)
				}
				sub[i] = h[from:to]
			}
			r.v = validator{dev: v.dev, byKind: map[string]int{}}
			r.missing = r.v.finalAgainst(mergeAfter(sub), func(fn func(addrPending)) { liveIn(d.Segments[r.seg:], r.lo, last, fn) })
		})
	}
	wg.Wait()
	for _, r := range rs {
		for _, p := range r.v.list {
			v.join(p)
		}
	}
	for _, r := range rs {
		for _, a := range r.missing {
			v.add(missingKind, -1, a)
		}
	}
	return v.skipped()
}

// finalRange is a range of the final state that finalParts checks: from
// segment seg's first live block, at address lo, to the next range's;
// then its problems.
type finalRange struct {
	seg     int
	lo      uint64
	v       validator
	missing []uint64
}

// cutFinal cuts segs, which hold blocks, into up to ranges ranges of about
// as many blocks, each starting at a segment's first live block, at a
// greater address than the range before (blocks at one address in one
// range).
func cutFinal(segs []Segment, blocks, ranges int) []*finalRange {
	rs := []*finalRange{{}}
	acc := 0
	for i, s := range segs {
		if acc >= len(rs)*blocks/ranges && len(rs) < ranges {
			if a, ok := firstLive(segs[i:]); ok && a > rs[len(rs)-1].lo {
				rs = append(rs, &finalRange{seg: i, lo: a})
			}
		}
		acc += len(s.Blocks)
	}
	return rs
}

// finalRangeMin is the fewest blocks of the final state a range of
// finalParts takes.
var finalRangeMin = 1 << 16

// firstLive returns the address of the first live block of segs.
func firstLive(segs []Segment) (uint64, bool) {
	for _, s := range segs {
		for i := range s.Blocks {
			if s.Blocks[i].State.Live() {
				return s.Blocks[i].Addr, true
			}
		}
	}
	return 0, false
}

// join counts p's occurrences in v, as if v had added each: its examples
// after those v holds, up to maxExamples.
func (v *validator) join(p Problem) {
	i, ok := v.byKind[p.Kind]
	if !ok {
		i = len(v.list)
		v.byKind[p.Kind] = i
		v.list = append(v.list, Problem{Device: v.dev, Kind: p.Kind})
	}
	q := &v.list[i]
	q.Count += p.Count
	for _, x := range p.Examples {
		if len(q.Examples) < maxExamples {
			q.Examples = append(q.Examples, x)
		}
	}
}

// partOf is the part, of parts, that validates the blocks at addr: a hash
// of it, unlike the one that places it in a part's table, so that each
// part's blocks spread over its table.
func partOf(addr uint64, parts int) int {
	return int((addr >> 9) * 0xd6e8feb86659fd93 >> 40 % uint64(parts))
}

// mergeParts joins the problems of vs, the parts of one validation, into
// those one pass over all of the trace finds: each kind counted over the
// parts, its first examples kept, the kinds in the order of their first
// occurrence (within one event, the order of the part that found both).
func mergeParts(vs []*validator) *validator {
	type kindAt struct {
		p     Problem
		event int // of its first occurrence
		part  int // where it first occurred,
		at    int // and its place in that part's list
	}
	byKind := map[string]*kindAt{}
	var kinds []*kindAt
	// Every part sees every segment_free: one with blocks of any part
	// live counts once. Nothing else is found at such an event.
	var segLive []ProblemAt
	for _, v := range vs {
		segLive = append(segLive, v.segLive...)
	}
	slices.SortStableFunc(segLive, func(a, b ProblemAt) int { return cmp.Compare(a.Event, b.Event) })
	segLive = slices.CompactFunc(segLive, func(a, b ProblemAt) bool { return a.Event == b.Event })
	if len(segLive) > 0 {
		k := &kindAt{p: Problem{Device: vs[0].dev, Kind: segLiveKind, Count: len(segLive), Examples: segLive}, event: segLive[0].Event}
		byKind[segLiveKind] = k
		kinds = append(kinds, k)
	}
	for part, v := range vs {
		for at, p := range v.list {
			k := byKind[p.Kind]
			if k == nil {
				k = &kindAt{p: Problem{Device: p.Device, Kind: p.Kind}, event: p.Examples[0].Event, part: part, at: at}
				byKind[p.Kind] = k
				kinds = append(kinds, k)
			} else if p.Examples[0].Event < k.event {
				k.event, k.part, k.at = p.Examples[0].Event, part, at
			}
			k.p.Count += p.Count
			k.p.Examples = append(k.p.Examples, p.Examples...)
		}
	}
	slices.SortFunc(kinds, func(a, b *kindAt) int {
		return cmp.Or(cmp.Compare(a.event, b.event), cmp.Compare(a.part, b.part), cmp.Compare(a.at, b.at))
	})
	out := &validator{dev: vs[0].dev, byKind: map[string]int{}, kinds: vs[0].kinds}
	for i, k := range kinds {
		slices.SortStableFunc(k.p.Examples, func(a, b ProblemAt) int { return cmp.Compare(a.Event, b.Event) })
		k.p.Examples = k.p.Examples[:min(len(k.p.Examples), maxExamples)]
		out.byKind[k.p.Kind] = i
		out.list = append(out.list, k.p)
	}
	return out
}

// segLiveKind is the problem the parts' segLive make.
const segLiveKind = "segment_free of a segment with live blocks"
