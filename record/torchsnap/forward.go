package torchsnap

import (
	"github.com/tracer-dev/tracer/internal/addrmap"
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

// Followed reports whether f followed exactly d's events, no more and no
// fewer: a snapshot with one device, whose trace is the spill's only run.
func (f *Forward) Followed(d *Device) bool {
	return f != nil && d.sp != nil && d.spLo == 0 && d.spN == f.n && d.sp.flushed == f.n
}

// Covers reports whether f followed exactly d's events and kept what it
// needs of them to give undo's start state.
func (f *Forward) Covers(d *Device) bool { return f.Followed(d) && !f.invalid }

// startState is the state undo derives from d's end state and the events
// f followed (Covers(d)), and whether the trace holds an unseen free.
func (f *Forward) startState(d *Device) (st *startState, unseenFree bool) {
	return mergeStart(d, []Forward{*f}, func(uint64) int { return 0 }, f.segEvs)
}

// mergeStart is the start state that undo derives from d's end state and
// the block events fs followed, each those of the addresses that shareOf
// gives it, and the segment events segEvs, and whether the trace holds an
// unseen free.
func mergeStart(d *Device, fs []Forward, shareOf func(uint64) int, segEvs []trace.Event) (st *startState, unseenFree bool) {
	st = &startState{}
	// Blocks: the end state's where the trace does not decide otherwise
	// (read from the segments: of two blocks at one address the last
	// counts, as in the end state's table, since r is the address's).
	endBlocks(d, func(b liveBlock) {
		r := fs[shareOf(b.addr)].addrs.Ref(b.addr)
		switch {
		case r == nil:
			st.blocks.Put(b.addr, b)
		case r.res == resChain:
			b.pending, b.freed = false, true
			st.blocks.Put(b.addr, b)
		}
	})
	for i := range fs {
		f := &fs[i]
		f.addrs.All(func(a uint64, r *fwdAddr) {
			if r.res == resBlock || r.res == resChain && st.blocks.Ref(a) == nil {
				st.blocks.Put(a, *f.starts.Ref(a))
			}
		})
		unseenFree = unseenFree || f.unseenFree || f.starts.Len() > 0
	}
	// Ranges: the end state's, with the segment events undone, as undo
	// does (it sees no block event among them).
	end := &startState{segs: endSegs(d)}
	end.undoEvents(segEvs, false)
	st.segs = end.segs
	return st, unseenFree
}
