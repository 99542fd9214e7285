package torchsnap

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/tracer-dev/tracer/internal/addrmap"
	"github.com/tracer-dev/tracer/trace"
)

// Allocator constants that decide how large a block was (caching-allocator.md §2, §6).
const (
	smallSize     = 1 << 20  // kSmallSize: requests up to 1 MiB use the small pool
	smallBuffer   = 2 << 20  // kSmallBuffer: the size of every small-pool segment
	nonSplitRound = 20 << 20 // max_non_split_rounding default: oversize tolerance
)

// Reconstruct returns the events that rebuild the allocator state just before
// d.Events[0]: when PyTorch's ring buffer wrapped, the allocs of blocks that
// are still live and the segment_allocs of segments that still exist are gone,
// and a replay that starts empty would free what it never saw.
//
// It starts from d.Segments and undoes the trace backwards (spec
// pytorch-snapshot.md §11.1). The result is one segment_alloc per segment that
// existed at the start (one segment_map per mapped range for expandable
// segments), then one alloc per block live at the start, in address order,
// all flagged trace.FlagReconstructed, with TimeUs of the first event. An alloc
// carries the requested bytes in Size and the block size in BlockSize: exact
// for blocks still live at the end; round(requested) for blocks freed during
// the trace, widened by a large-pool remainder the allocator would not have
// split off. Blocks between free_requested and free_completed at the start
// also carry trace.FlagPending.
//
// The result is empty when the recording started before the first allocation.
// Reconstruct sets d.Truncated. It fails only when round is nil; contradictions
// in the history are Validate's business.
//
// Requests of max_split_size or more (oversize, never split) are widened by a
// gap of up to 20 MiB, the default max_non_split_rounding, which snapshots do
// not record.
func (d *Device) Reconstruct(round func(requested int64) int64) ([]trace.Event, error) {
	return d.ReconstructFollowed(nil, round)
}

// ReconstructFollowed is Reconstruct, with the start state f derived as
// the events were decoded where f covers d (Forward.Covers), instead of
// undoing the trace: the same result, without reading the trace back.
func (d *Device) ReconstructFollowed(f *Forward, round func(requested int64) int64) ([]trace.Event, error) {
	if round == nil {
		return nil, fmt.Errorf("torchsnap: device %d: Reconstruct needs a rounding function", d.Index)
	}
	var st *start
	var unseenFree, ok bool
	if f.Covers(d) {
		st, unseenFree = f.startState(d)
	} else if st, unseenFree, ok = d.parallelStart(); !ok {
		u := newStartState(d)
		var err error
		if unseenFree, err = u.undoDevice(d); err != nil {
			return nil, err
		}
		st = u.sorted()
	}
	segs, blocks := st.segs.list(), st.blocks
	d.start, d.startOf = &keptStart{segs: st.segs, live: addrsPending(blocks)}, d.Events
	st = nil // its blocks are the output's below, and then the collector's
	blocks = inSegments(segs, blocks)
	d.Truncated = unseenFree || len(segs) > 0 || len(blocks) > 0
	if len(segs) == 0 && len(blocks) == 0 {
		return nil, nil
	}
	var t0 int64
	if d.Len() > 0 {
		var first [1]trace.Event
		evs, err := d.Chunk(0, 1, first[:])
		if err != nil {
			return nil, err
		}
		t0 = evs[0].TimeUs
	}
	out := make([]trace.Event, 0, len(segs)+len(blocks))
	for _, s := range segs {
		k := trace.KindSegmentAlloc
		if s.expandable {
			k = trace.KindSegmentMap
		}
		out = append(out, trace.Event{TimeUs: t0, Device: d.Index, Kind: k, Addr: s.addr, Size: s.size,
			Stream: s.stream, Pool: s.pool, Stack: s.stack, Flags: trace.FlagReconstructed})
	}
	for i := range blocks {
		b := &blocks[i]
		seg := segAt(segs, b.addr) // one, since inSegments
		f := trace.FlagReconstructed
		if b.pending {
			f |= trace.FlagPending
		}
		out = append(out, trace.Event{TimeUs: t0, Device: d.Index, Kind: trace.KindAlloc, Addr: b.addr,
			Size: b.req, Stream: seg.stream, Pool: seg.pool, Stack: b.stack, Flags: f, BlockSize: d.blockSize(seg, blocks, i, round)})
	}
	for i := range out {
		out[i].Seq = int64(i)
	}
	return out, nil
}

// inSegments returns the blocks, sorted by address, that lie in one of
// segs (sorted by address), in place. A block live at the start lies in a
// segment that existed then; one that does not cannot be restored: a free
// whose alloc was not recorded (skip_actions=["alloc"]), of a block in a
// segment allocated during the trace. Left out, its free is one of a block
// never allocated, for Validate and the replay to report.
func inSegments(segs []*segRange, blocks []liveBlock) []liveBlock {
	kept := blocks[:0]
	for _, b := range blocks {
		if segAt(segs, b.addr) != nil {
			kept = append(kept, b)
		}
	}
	return kept
}

// segAt returns the range of segs (sorted by address) that holds addr, or
// nil.
func segAt(segs []*segRange, addr uint64) *segRange {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].end() > addr })
	if i < len(segs) && segs[i].addr <= addr {
		return segs[i]
	}
	return nil
}

// keptStart is the state just before a device's first event as Validate
// needs it: the segment ranges, and each live block's address and whether
// its free is pending, sorted by address (16 bytes a block, where the
// start state's blocks take 32 and its table of them 64 or more a slot:
// an import keeps it while its model replays the trace).
type keptStart struct {
	segs *segList
	live []addrPending
}

// addrsPending lists blocks' addresses and pending frees, in their order.
func addrsPending(blocks []liveBlock) []addrPending {
	live := make([]addrPending, len(blocks))
	for i := range blocks {
		live[i] = addrPending{blocks[i].addr, blocks[i].pending}
	}
	return live
}

// startState returns the state just before d.Events[0], as undo derives it
// from d.Segments: the one Reconstruct derived, if d.Events is still the
// slice it walked (segment ranges copied, since callers change them), or a
// new one.
func (d *Device) startState() (*keptStart, error) {
	if st := d.start; st != nil && (d.sp != nil || d.recs != nil || d.rf != nil || len(d.startOf) == len(d.Events) &&
		(len(d.Events) == 0 || &d.startOf[0] == &d.Events[0])) {
		return &keptStart{live: st.live, segs: st.segs.clone()}, nil
	}
	st := newStartState(d)
	if _, err := st.undoDevice(d); err != nil {
		return nil, err
	}
	s := st.sorted()
	return &keptStart{segs: s.segs, live: addrsPending(s.blocks)}, nil
}

// undoDevice is undo of d's trace, read backwards a chunk at a time.
func (st *startState) undoDevice(d *Device) (unseenFree bool, err error) {
	buf := d.chunkBuf()
	for hi := d.Len(); hi > 0; {
		lo := max(0, hi-ChunkSize)
		evs, err := d.Chunk(lo, hi, buf)
		if err != nil {
			return false, err
		}
		unseenFree = st.undoEvents(evs, unseenFree)
		hi = lo
	}
	return st.undoEnd(unseenFree), nil
}

// segRange is a segment, or one mapped range of an expandable segment.
type segRange struct {
	addr       uint64
	size       int64
	stream     uint64
	pool       trace.PoolID
	large      bool
	expandable bool
	stack      trace.StackID
}

func (s *segRange) end() uint64 { return s.addr + uint64(s.size) }

// liveBlock is a block holding user memory. size is 0 while unknown (the
// block was re-created from a free event, which carries requested bytes).
// freed is set, during undo, on a block that a free after that point
// released: an alloc of it must come before, or the trace lost it. Its
// stream and pool are its segment's (Reconstruct's output takes them from
// there): a block outside every segment is not restored.
type liveBlock struct {
	addr           uint64
	req, size      int64
	stack          trace.StackID
	pending, freed bool
}

// startState is the state undo derives, backwards, in a table of blocks by
// address.
type startState struct {
	segs   *segList
	blocks addrmap.Map[liveBlock]
}

// start is a start state as Reconstruct uses it: the ranges, and the
// blocks sorted by address, one an address.
type start struct {
	segs   *segList
	blocks []liveBlock
}

// sorted is st as a start; st's table is left to the collector.
func (st *startState) sorted() *start {
	blocks := make([]liveBlock, 0, st.blocks.Len())
	st.blocks.All(func(_ uint64, b *liveBlock) { blocks = append(blocks, *b) })
	slices.SortFunc(blocks, func(a, b liveBlock) int { return cmp.Compare(a.addr, b.addr) })
	return &start{segs: st.segs, blocks: blocks}
}

func newStartState(d *Device) *startState {
	st := &startState{segs: endSegs(d)}
	endBlocks(d, func(b liveBlock) { st.blocks.Put(b.addr, b) })
	return st
}

// endSegs is the list of d's segments at the end of the trace.
func endSegs(d *Device) *segList {
	segs := make([]*segRange, 0, len(d.Segments))
	for i := range d.Segments {
		s := &d.Segments[i]
		segs = append(segs, &segRange{addr: s.Addr, size: s.TotalSize, stream: s.Stream, pool: s.Pool,
			large: s.Large, expandable: s.Expandable, stack: s.Stack})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].addr < segs[j].addr })
	return newSegList(segs)
}

// endBlocks calls fn on each block live at the end of d's trace, in the
// order of d's segments.
func endBlocks(d *Device, fn func(liveBlock)) {
	for i := range d.Segments {
		s := &d.Segments[i]
		for k := range s.Blocks {
			if s.Blocks[k].State.Live() {
				fn(endBlock(s, &s.Blocks[k]))
			}
		}
	}
}

// endBlock is the live block b of segment s, as endBlocks gives it.
func endBlock(s *Segment, b *Block) liveBlock {
	return liveBlock{addr: b.Addr, req: b.RequestedSize, size: b.Size, stack: b.Stack, pending: b.State == ActivePendingFree}
}

// undo walks evs backwards, turning the end state into the start state. It
// reports whether a free in evs had no alloc of its block before it (since
// the block's previous free_completed, if any): an alloc the window lost.
// The walk finds that out as it goes (freed): a free_completed undone on
// a block that a later free released, or a block live at the start that a
// free released.
func (st *startState) undo(evs []trace.Event) (unseenFree bool) {
	return st.undoEnd(st.undoEvents(evs, false))
}

// undoEvents is undo's walk over evs, the events before those already
// undone; unseenFree is what the walk found so far.
func (st *startState) undoEvents(evs []trace.Event, unseenFree bool) bool {
	for i := len(evs) - 1; i >= 0; i-- {
		e := &evs[i]
		switch e.Kind {
		case trace.KindAlloc:
			st.blocks.Delete(e.Addr)
		case trace.KindFreeRequested:
			if b := st.blocks.Ref(e.Addr); b != nil {
				b.pending, b.freed = false, true
			} else {
				// free_completed was skipped or lost to a race: the block was allocated.
				st.blocks.Put(e.Addr, liveBlock{addr: e.Addr, req: e.Size, stack: e.Stack, freed: true})
			}
		case trace.KindFreeCompleted:
			b := liveBlock{addr: e.Addr, req: e.Size, stack: e.Stack, pending: true, freed: true}
			if old := st.blocks.Ref(e.Addr); old != nil {
				// Live right after its free_completed: a later free found
				// no alloc after this one, or the end state holds a block
				// never allocated since.
				unseenFree = unseenFree || old.freed
				*old = b
			} else {
				st.blocks.Put(e.Addr, b)
			}
		case trace.KindSegmentFree:
			st.segs.insert(&segRange{addr: e.Addr, size: e.Size, stream: e.Stream, pool: e.Pool,
				large: e.Size != smallBuffer, stack: trace.NoStack})
		case trace.KindSegmentAlloc:
			st.segs.removeStart(e.Addr)
		case trace.KindSegmentUnmap:
			st.unmap(e)
		case trace.KindSegmentMap:
			st.segs.cut(e.Addr, e.Size)
		}
	}
	return unseenFree
}

// undoEnd ends undo: a block live at the start that a free released is an
// alloc the window lost.
func (st *startState) undoEnd(unseenFree bool) bool {
	if !unseenFree {
		st.blocks.All(func(_ uint64, b *liveBlock) { unseenFree = unseenFree || b.freed })
	}
	return unseenFree
}

// unmap undoes segment_unmap: the range was mapped before, contiguous with
// its neighbours of the same stream.
func (st *startState) unmap(e *trace.Event) {
	st.segs.mapRange(&segRange{addr: e.Addr, size: e.Size, stream: e.Stream, pool: e.Pool,
		large: true, expandable: true, stack: trace.NoStack})
}

// blockSize is the size of blocks[i], which lies in seg: its own, or, for
// a block re-created from a free event (size 0), the size the allocator
// gave the requested bytes.
//
// A freed block's size is round(requested), except in the large pool of a
// non-expandable segment: there the allocator splits a free block only when
// more than 1 MiB would remain (and never for requests ≥ max_split_size, which
// may take a block up to 20 MiB larger). Every large-pool block is over 1 MiB,
// so a gap of at most 1 MiB between a block's rounded end and the next live
// block (or the segment end) cannot be a free block of its own: it is the
// remainder the allocation kept.
func (d *Device) blockSize(seg *segRange, blocks []liveBlock, i int, round func(int64) int64) int64 {
	b := &blocks[i]
	if b.size != 0 {
		return b.size
	}
	size := round(b.req)
	if !seg.large || seg.expandable {
		return size
	}
	next := seg.end()
	if i+1 < len(blocks) && blocks[i+1].addr < next {
		next = blocks[i+1].addr
	}
	end := b.addr + uint64(size)
	if next <= end {
		return size
	}
	gap := int64(next - end)
	oversize := d.maxSplit > 0 && size >= d.maxSplit
	if gap <= smallSize || (oversize && gap < nonSplitRound) {
		size += gap
	}
	return size
}
