package torchsnap

import (
	"cmp"
	"runtime"
	"slices"
	"sync"

	"github.com/tracer-dev/tracer/internal/addrmap"
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// Forward derives, from a device's events read in order as they are
// decoded, the start state that Reconstruct's undo derives backwards from
// the end state: so that an import, whose decoder spills its events (Open)
// on one core, has the start state when decoding ends instead of reading
// the whole trace back once more. OpenFollowed feeds it.
//
// Undo (reconstruct.go) changes the blocks and the segment ranges apart:
// no block event touches a range, no segment event a block. Its result for
// a block address depends only on that address's events:
//   - first an alloc: no block at the start;
//   - first a free_completed: the block it describes, pending and freed;
//   - first a run of free_requested, ended by an alloc: the block the last
//     of them describes, freed; ended by a free_completed: the block that
//     describes, freed, not pending; not ended: the end state's block at
//     the address, freed and not pending, or if there is none the last
//     free_requested's;
//   - no event: the end state's block, as it is.
//
// Undo finds an unseen free where a free_completed is followed, at its
// address, by another free, and where a block live at the start was freed.
//
// The ranges are not undone address by address (a segment_alloc's undo
// removes the range that contains its address, an unmap's merges with its
// neighbours), but segment events are few, a percent of a trace or less:
// Forward keeps them and undoes them alone, backwards, at the end. Past
// maxSegEvents of them it gives up, and undo decides (Covers).
type Forward struct {
	n       int64 // events followed
	invalid bool  // more segment events than Forward keeps

	addrs  addrmap.Map[fwdAddr]   // every block address seen
	starts addrmap.Map[liveBlock] // the start block of the addresses whose first event is a free
	segEvs []trace.Event          // the segment events, in order

	unseenFree bool
	peeked     uint64 // the peeks' keys, kept so that they are made
}

// maxSegEvents bounds the segment events a Forward keeps (88 bytes each).
const maxSegEvents = 1 << 16

// fwdAddr is what Forward knows of a block address.
type fwdAddr struct {
	res  fwdRes
	last trace.Kind // the address's last event
}

type fwdRes uint8

const (
	resNone  fwdRes = iota // the first event was an alloc: no block at the start
	resBlock               // starts holds the start block
	resChain               // only free_requested so far: starts holds the last one's block
)

// TablesIn has f make its tables of addresses in h (addrmap's TablesIn),
// before the first Add: h must outlive f's use, startState's included.
func (f *Forward) TablesIn(h *grow.OffHeap) {
	f.addrs.TablesIn(h)
	f.starts.TablesIn(h)
}

// Add follows evs, the next events of the trace.
func (f *Forward) Add(evs []trace.Event) {
	f.n += int64(len(evs))
	if f.invalid {
		return
	}
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted:
			f.block(e)
		case trace.KindSegmentAlloc, trace.KindSegmentFree, trace.KindSegmentMap, trace.KindSegmentUnmap:
			if len(f.segEvs) == maxSegEvents {
				f.invalid, f.segEvs = true, nil
				return
			}
			f.segEvs = append(f.segEvs, *e)
		}
	}
}

func (f *Forward) block(e *trace.Event) {
	if dst, pending := f.step(e.Addr, e.Kind); dst != nil {
		*dst = freedBlock(e, pending)
	}
}

// step follows a block event of kind k at address a. Where the event's
// block is the address's start block so far, it returns where to put it
// (freedBlock's, with pending): the caller reads the event's size and
// stack only then, a few times an address at most.
func (f *Forward) step(a uint64, k trace.Kind) (dst *liveBlock, pending bool) {
	r, had := f.addrs.Upsert(a) // one probe for a new address
	if !had {
		switch k {
		case trace.KindAlloc:
			*r = fwdAddr{res: resNone, last: k}
			return nil, false
		case trace.KindFreeCompleted:
			*r = fwdAddr{res: resBlock, last: k}
			dst, _ = f.starts.Upsert(a)
			return dst, true
		}
		*r = fwdAddr{res: resChain, last: k}
		dst, _ = f.starts.Upsert(a)
		return dst, false
	}
	if k != trace.KindAlloc && r.last == trace.KindFreeCompleted {
		f.unseenFree = true
	}
	r.last = k
	if r.res != resChain {
		return nil, false
	}
	if k == trace.KindAlloc {
		r.res = resBlock
		return nil, false
	}
	if k == trace.KindFreeCompleted {
		r.res = resBlock
	}
	return f.starts.Ref(a), false
}

// followRecs follows the block events of recs whose indexes, less base,
// idx lists, in order. It peeks at the next events' slots a batch at a
// time, so that their cache misses overlap (the tables are larger than
// the caches: a miss an event was most of the start state's CPU).
func (f *Forward) followRecs(recs []srec, base int, idx []int32) {
	peekAt := 0
	for j, i := range idx {
		if j >= peekAt {
			peekAt = min(j+fwdPeek, len(idx))
			for _, x := range idx[j:peekAt] {
				f.peeked += f.addrs.Peek(recs[int(x)-base].Addr)
			}
		}
		r := &recs[int(i)-base]
		if dst, pending := f.step(r.Addr, r.Kind); dst != nil {
			*dst = liveBlock{addr: r.Addr, req: r.Size, stack: r.Stack, pending: pending, freed: true}
		}
	}
}

// followEvents is followRecs for events not packed.
func (f *Forward) followEvents(evs []trace.Event, idx []int32) {
	peekAt := 0
	for j, i := range idx {
		if j >= peekAt {
			peekAt = min(j+fwdPeek, len(idx))
			for _, x := range idx[j:peekAt] {
				f.peeked += f.addrs.Peek(evs[x].Addr)
			}
		}
		f.block(&evs[i])
	}
}

// fwdPeek is how many events' slots followRecs peeks at ahead.
const fwdPeek = 16

// freedBlock is the block undo re-creates from the free e.
func freedBlock(e *trace.Event, pending bool) liveBlock {
	return liveBlock{addr: e.Addr, req: e.Size, stack: e.Stack, pending: pending, freed: true}
}

// Followed reports whether f followed exactly d's events, no more and no
// fewer: a snapshot with one device, whose trace is the only run of the
// spill (OpenFollowed) or of the packed store (ReadFileMappedFollowed).
func (f *Forward) Followed(d *Device) bool {
	switch {
	case f == nil:
		return false
	case d.sp != nil:
		return d.spLo == 0 && d.spN == f.n && d.sp.flushed == f.n
	case d.rf != nil:
		return d.rfLo == 0 && d.rfN == f.n && d.followN == f.n
	case d.recs != nil:
		return d.recsLo == 0 && int64(len(d.recs)) == f.n && d.followN == f.n
	}
	return false
}

// Covers reports whether f followed exactly d's events and kept what it
// needs of them to give undo's start state.
func (f *Forward) Covers(d *Device) bool { return f.Followed(d) && !f.invalid }

// startState is the state undo derives from d's end state and the events
// f followed (Covers(d)), and whether the trace holds an unseen free.
func (f *Forward) startState(d *Device) (st *start, unseenFree bool) {
	return mergeStart(d, []Forward{*f}, func(uint64) int { return 0 }, f.segEvs)
}

// mergeStart is the start state that undo derives from d's end state and
// the block events fs followed, each those of the addresses that shareOf
// gives it, and the segment events segEvs, and whether the trace holds an
// unseen free. The lookups in the shares' tables, most of its work, are
// made on a goroutine per share (mergeFind). The blocks are made as a list
// sorted by address, without a table of them (64 bytes or more a slot,
// grown by doubling: for a wrapped history of 300k live blocks, 64 MB
// allocated where the list takes 10): the end state's blocks kept, in
// segment order, and the shares' start blocks, each sorted, merged.
func mergeStart(d *Device, fs []Forward, shareOf func(uint64) int, segEvs []trace.Event) (st *start, unseenFree bool) {
	acts, starts := mergeFind(d, fs, shareOf)
	n := 0
	for _, a := range acts {
		if a != endDropped {
			n++
		}
	}
	m := 0
	for i := range starts {
		m += len(starts[i])
	}
	// The end state's blocks where the trace does not decide otherwise.
	blocks := make([]liveBlock, 0, n+m)
	inOrder := true
	i := 0
	for j := range d.Segments {
		for k := range d.Segments[j].Blocks {
			if a := acts[i]; a != endDropped {
				b := endBlock(&d.Segments[j], &d.Segments[j].Blocks[k])
				if a == endChained {
					b.pending, b.freed = false, true
				}
				inOrder = inOrder && (len(blocks) == 0 || blocks[len(blocks)-1].addr < b.addr)
				blocks = append(blocks, b)
			}
			i++
		}
	}
	if !inOrder {
		// Of two blocks at one address the last counts, as in the end
		// state's table.
		slices.SortStableFunc(blocks, byBlockAddr)
		w := 0
		for r := range blocks {
			if r+1 < len(blocks) && blocks[r+1].addr == blocks[r].addr {
				continue
			}
			blocks[w] = blocks[r]
			w++
		}
		blocks = blocks[:w]
	}
	// The start blocks the shares' walks gave: one an address (an address
	// is one share's). A chained one (resChain) yields to an end block at
	// its address; one a free_completed gave (resBlock) has none beside it
	// (mergeFind dropped it).
	var from []liveBlock
	for i := range fs {
		from = append(from, starts[i]...)
		starts[i] = nil
		f := &fs[i]
		unseenFree = unseenFree || f.unseenFree || f.starts.Len() > 0
	}
	slices.SortFunc(from, byBlockAddr)
	blocks = mergeBlocks(blocks, from)
	// Ranges: the end state's, with the segment events undone, as undo
	// does (it sees no block event among them).
	end := &startState{segs: endSegs(d)}
	end.undoEvents(segEvs, false)
	return &start{segs: end.segs, blocks: blocks}, unseenFree
}

func byBlockAddr(a, b liveBlock) int { return cmp.Compare(a.addr, b.addr) }

// mergeBlocks merges from into ends, both sorted by address with one block
// an address, in ends' room (its capacity holds both): at an address in
// both, ends' block.
func mergeBlocks(ends, from []liveBlock) []liveBlock {
	if len(from) == 0 {
		return ends
	}
	i, w := len(ends)-1, len(ends)+len(from)
	out := ends[:w]
	for j := len(from) - 1; j >= 0; {
		w--
		switch {
		case i >= 0 && ends[i].addr > from[j].addr:
			out[w] = ends[i]
			i--
		case i >= 0 && ends[i].addr == from[j].addr:
			out[w] = ends[i]
			i--
			j--
		default:
			out[w] = from[j]
			j--
		}
	}
	// The rest of ends is in place; from's blocks that yielded left room
	// at the front.
	if gap := w - (i + 1); gap > 0 {
		copy(out[i+1:], out[w:])
		out = out[:len(out)-gap]
	}
	return out
}

// What mergeStart does with a live block of the end state: leave it out
// (the trace decides the address's start), keep it, or keep it freed (the
// address's events were only free_requested).
const (
	endDropped uint8 = iota
	endKept
	endChained
)

// mergeFind looks up each live end-state block in its share's table, on
// several goroutines, each a range of the segments' blocks (the tables are
// only read), into acts (acts[i] for the i-th of the segments' blocks, in
// order, live or not); and lists, on a goroutine per share, the addresses
// that give a start block (resBlock) or may (resChain), in the order of
// its table of them. The lookups take as many goroutines as the shares, or more
// (findParts): a spilled import's one share (Forward) looked a large end
// state's blocks up on one core, most of its start state's wall.
func mergeFind(d *Device, fs []Forward, shareOf func(uint64) int) (acts []uint8, starts [][]liveBlock) {
	first := make([]int, len(d.Segments)+1) // the index of each segment's first block
	for j := range d.Segments {
		first[j+1] = first[j] + len(d.Segments[j].Blocks)
	}
	n := first[len(d.Segments)]
	acts, starts = make([]uint8, n), make([][]liveBlock, len(fs))
	parts := findParts(n, len(fs))
	peeked := make([]uint64, parts)
	var wg sync.WaitGroup
	for w := range parts {
		wg.Go(func() {
			var sum uint64
			defer func() { peeked[w] = sum }()
			lo, hi := w*n/parts, (w+1)*n/parts
			j, _ := slices.BinarySearch(first, lo+1)
			for j--; lo < hi; j++ {
				seg := d.Segments[j].Blocks
				blocks := seg[lo-first[j] : min(len(seg), hi-first[j])]
				peekAt := 0
				for k, b := range blocks {
					if k >= peekAt {
						// The next blocks' slots, so that their misses overlap.
						peekAt = min(k+fwdPeek, len(blocks))
						for _, p := range blocks[k:peekAt] {
							if p.State.Live() {
								sum += fs[shareOf(p.Addr)].addrs.Peek(p.Addr)
							}
						}
					}
					if b.State.Live() {
						switch r := fs[shareOf(b.Addr)].addrs.Ref(b.Addr); {
						case r == nil:
							acts[lo] = endKept
						case r.res == resChain:
							acts[lo] = endChained
						}
					}
					lo++
				}
			}
		})
	}
	for w := range len(fs) {
		wg.Go(func() {
			// The addresses of f.starts are those whose result is
			// resBlock or resChain (step): fewer than the table of all.
			fs[w].starts.All(func(_ uint64, b *liveBlock) {
				starts[w] = append(starts[w], *b)
			})
		})
	}
	wg.Wait()
	for w := range peeked { // kept, so that the peeks are made
		fs[w%len(fs)].peeked += peeked[w]
	}
	return acts, starts
}

// findPartBlocks is the fewest end-state blocks a lookup goroutine of
// mergeFind is given beyond the shares' own (a variable for the tests).
var findPartBlocks = 8192

// findParts is how many goroutines mergeFind looks n blocks up on: one a
// share, or one a core where the blocks are many enough (none without
// shares).
func findParts(n, shares int) int {
	if shares == 0 {
		return 0
	}
	return max(shares, min(runtime.GOMAXPROCS(0), n/findPartBlocks))
}
