package torchsnap

import (
	"cmp"
	"slices"

	"github.com/tracer-dev/tracer/internal/addrmap"
	"github.com/tracer-dev/tracer/trace"
)

// Forward derives, from a device's events read in order as they are
// decoded, the start state that Reconstruct's undo derives backwards from
// the end state: so that an import, whose decoder spills its events (Open)
// on one core, has the start state when decoding ends instead of reading
// the whole trace back once more (on a real 9.6 MB snapshot, 3–4 ms of a
// 40 ms import on the GPU host). OpenFollowed feeds it.
//
// Undo's result for a block address depends only on that address's
// events, each undone as in reconstruct.go:
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
// Segments are undone by address too, but a segment_alloc's undo removes
// the range that contains its address, which is another range where two
// overlapped: Forward follows segment events only while they pair up (a
// segment_alloc of a free or new address, then a segment_free of it), no
// range is mapped or unmapped (expandable segments, whose undo merges and
// cuts ranges), and no two ranges were live at once where they overlap.
// Anything else leaves the start state to undo (Covers reports false, or
// startState's ok).
type Forward struct {
	n       int64 // events followed
	invalid bool  // an event Forward does not follow exactly

	addrs  addrmap.Map[fwdAddr]   // every block address seen
	starts addrmap.Map[liveBlock] // the start block of the addresses whose first event is a free
	segs   addrmap.Map[fwdSeg]    // every segment address seen
	lives  []segLife              // every segment the trace allocated or freed, and when

	unseenFree bool
}

// segLife is a segment range and when it was live: from event from (-1:
// before the trace) to event to (maxLife: after it).
type segLife struct {
	addr     uint64
	size     int64
	from, to int64
}

const maxLife = int64(^uint64(0) >> 1)

// maxLives bounds the segments Forward keeps: past it, undo decides.
const maxLives = 1 << 16

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

// fwdSeg is what Forward knows of a segment address.
type fwdSeg struct {
	live  bool      // allocated now
	life  int       // its last lifetime, in lives
	start *segRange // the segment at the start (its first event was a segment_free), or nil
}

// Add follows evs, the next events of the trace.
func (f *Forward) Add(evs []trace.Event) {
	f.n += int64(len(evs))
	if f.invalid {
		return
	}
	seq := f.n - int64(len(evs))
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted:
			f.block(e)
		case trace.KindSegmentAlloc, trace.KindSegmentFree:
			f.segment(e, seq+int64(i))
		case trace.KindSegmentMap, trace.KindSegmentUnmap:
			f.invalid = true
			return
		}
	}
}

func (f *Forward) block(e *trace.Event) {
	r := f.addrs.Ref(e.Addr)
	if r == nil {
		switch e.Kind {
		case trace.KindAlloc:
			f.addrs.Put(e.Addr, fwdAddr{res: resNone, last: e.Kind})
		case trace.KindFreeCompleted:
			f.addrs.Put(e.Addr, fwdAddr{res: resBlock, last: e.Kind})
			f.starts.Put(e.Addr, freedBlock(e, true))
		default:
			f.addrs.Put(e.Addr, fwdAddr{res: resChain, last: e.Kind})
			f.starts.Put(e.Addr, freedBlock(e, false))
		}
		return
	}
	if e.Kind != trace.KindAlloc && r.last == trace.KindFreeCompleted {
		f.unseenFree = true
	}
	r.last = e.Kind
	if r.res != resChain {
		return
	}
	switch e.Kind {
	case trace.KindAlloc:
		r.res = resBlock
	case trace.KindFreeCompleted:
		r.res = resBlock
		*f.starts.Ref(e.Addr) = freedBlock(e, false)
	default:
		*f.starts.Ref(e.Addr) = freedBlock(e, false)
	}
}

// freedBlock is the block undo re-creates from the free e.
func freedBlock(e *trace.Event, pending bool) liveBlock {
	return liveBlock{addr: e.Addr, stream: e.Stream, pool: e.Pool, req: e.Size, stack: e.Stack, pending: pending, freed: true}
}

// segment follows e, event seq.
func (f *Forward) segment(e *trace.Event, seq int64) {
	if len(f.lives) == maxLives {
		f.invalid = true
		return
	}
	s := f.segs.Ref(e.Addr)
	alloc := e.Kind == trace.KindSegmentAlloc
	switch {
	case s == nil && alloc:
		f.segs.Put(e.Addr, fwdSeg{live: true, life: len(f.lives)})
		f.lives = append(f.lives, segLife{addr: e.Addr, size: e.Size, from: seq, to: maxLife})
	case s == nil:
		f.segs.Put(e.Addr, fwdSeg{life: len(f.lives), start: &segRange{addr: e.Addr, size: e.Size, stream: e.Stream,
			pool: e.Pool, large: e.Size != smallBuffer, stack: trace.NoStack}})
		f.lives = append(f.lives, segLife{addr: e.Addr, size: e.Size, from: -1, to: seq})
	case s.live == alloc:
		f.invalid = true // a second segment_alloc, or segment_free, in a row
	case alloc:
		s.live, s.life = true, len(f.lives)
		f.lives = append(f.lives, segLife{addr: e.Addr, size: e.Size, from: seq, to: maxLife})
	default:
		if l := &f.lives[s.life]; l.size == e.Size {
			s.live, l.to = false, seq
		} else {
			f.invalid = true // freed with another size than it was allocated with
		}
	}
}

// Followed reports whether f followed exactly d's events, no more and no
// fewer: a snapshot with one device, whose trace is the spill's only run.
func (f *Forward) Followed(d *Device) bool {
	return f != nil && d.sp != nil && d.spLo == 0 && d.spN == f.n && d.sp.flushed == f.n
}

// Covers reports whether f followed exactly d's events, all of them in a
// way that gives undo's start state.
func (f *Forward) Covers(d *Device) bool { return f.Followed(d) && !f.invalid }

// startState is the state undo derives from d's end state and the events
// f followed (Covers(d)), and whether the trace holds an unseen free; ok
// is false where the end state contradicts the segment events in a way
// undo resolves otherwise.
func (f *Forward) startState(d *Device) (st *startState, unseenFree, ok bool) {
	end := newStartState(d)
	st = &startState{}
	// Blocks: the end state's where the trace does not decide otherwise.
	end.blocks.All(func(a uint64, b *liveBlock) {
		r := f.addrs.Ref(a)
		switch {
		case r == nil:
			st.blocks.Put(a, *b)
		case r.res == resChain:
			c := *b
			c.pending, c.freed = false, true
			st.blocks.Put(a, c)
		}
	})
	f.addrs.All(func(a uint64, r *fwdAddr) {
		if r.res == resBlock || r.res == resChain && st.blocks.Ref(a) == nil {
			st.blocks.Put(a, *f.starts.Ref(a))
		}
	})
	unseenFree = f.unseenFree || f.starts.Len() > 0
	// Segments: the end state's that the trace never touched, and those
	// whose first event freed them.
	lives := slices.Clone(f.lives)
	for _, s := range end.segs {
		r := f.segs.Ref(s.addr)
		if r == nil {
			st.segs = append(st.segs, s)
			lives = append(lives, segLife{addr: s.addr, size: s.size, from: -1, to: maxLife})
			continue
		}
		if !r.live {
			return nil, false, false // freed last, yet there at the end: undo inserts it twice
		}
	}
	if overlapping(lives) {
		return nil, false, false
	}
	f.segs.All(func(_ uint64, r *fwdSeg) {
		if r.start != nil {
			st.segs = append(st.segs, r.start)
		}
	})
	slices.SortFunc(st.segs, func(a, b *segRange) int { return cmp.Compare(a.addr, b.addr) })
	return st, unseenFree, true
}

// overlapping reports whether two of lives overlap, in addresses and in
// time. It sorts lives.
func overlapping(lives []segLife) bool {
	slices.SortFunc(lives, func(a, b segLife) int { return cmp.Compare(a.addr, b.addr) })
	for i := range lives {
		a := &lives[i]
		for j := i + 1; j < len(lives) && lives[j].addr < a.addr+uint64(a.size); j++ {
			if b := &lives[j]; a.from < b.to && b.from < a.to {
				return true
			}
		}
	}
	return false
}
