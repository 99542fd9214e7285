package analysis

import (
	"math"

	"github.com/tracer-dev/tracer/trace"
)

// Levels are the byte series after the last event fed to a Summarizer
// (see the package doc for their definitions).
type Levels struct {
	Allocated int64 `json:"allocated_bytes"`
	Reserved  int64 `json:"reserved_bytes"`
	Active    int64 `json:"active_bytes"`
	Requested int64 `json:"requested_bytes"`
}

// Levels returns the byte series after the last event. It is O(1): a
// viewer calls it after every event to build its own reductions.
func (s *Summarizer) Levels() Levels {
	return Levels{Allocated: s.v[Allocated], Reserved: s.v[Reserved], Active: s.v[Active], Requested: s.v[Requested]}
}

// State is the allocator's state after one event, as the events show it:
// every segment (or contiguous mapped range of an expandable segment) and
// the live blocks inside it, by address. A viewer takes it to draw the
// segments at a moment and to aggregate live memory by site; Resume starts
// a Summarizer from it.
type State struct {
	// Event is the index of the last event folded in (-1: none).
	Event    int64          `json:"event"`
	Levels   Levels         `json:"levels"`
	Segments []SegmentState `json:"segments"`
	// Outside are the live blocks not counted in any segment (a corrupt or
	// cut trace), by address.
	Outside []BlockState `json:"outside"`
}

// SegmentState is one segment and its live blocks, by address.
type SegmentState struct {
	SegmentLayout
	Live []BlockState `json:"live"`
}

// BlockState is one live block.
type BlockState struct {
	Addr      uint64 `json:"addr"`
	Size      Bytes  `json:"size"`      // block bytes
	Requested Bytes  `json:"requested"` // the caller's request
	// Stack is the allocation site: a trace.StackID, trace.NoStack, or
	// BeforeRecording for a block live before the recording began.
	Stack       trace.StackID `json:"stack"`
	AllocEvent  int64         `json:"alloc_event"` // index of its alloc event
	AllocTimeUs int64         `json:"alloc_time_us"`
	Pending     bool          `json:"pending"` // freed, awaiting free_completed
}

// State returns the state after the last event. It costs O(segments + live
// blocks · log): meant for a moment a user picks, not for every event.
func (s *Summarizer) State() *State {
	st := &State{Event: s.n - 1, Levels: s.Levels(), Segments: make([]SegmentState, 0, s.segs.tree.Len())}
	s.segs.tree.Each(func(_ int64, g *segment) {
		st.Segments = append(st.Segments, SegmentState{SegmentLayout: layoutOf(g), Live: make([]BlockState, 0, g.blocks)})
	})
	st.Outside = []BlockState{}
	// The address tree gives the blocks in order; a block enters it once
	// (blocks.sync), so States taken again and again cost no sort.
	blocks := make([]BlockState, 0, s.live.n)
	s.live.inRange(math.MinInt64, math.MaxInt64, func(b *block) {
		var info blockInfo
		if p := s.live.info(b); p != nil {
			info = *p
		}
		blocks = append(blocks, BlockState{Addr: uint64(b.addr), Size: Bytes(b.size), Requested: Bytes(b.req),
			Stack: s.live.site(b), AllocEvent: info.allocN, AllocTimeUs: info.allocT, Pending: b.pending})
	})
	// Both lists are by address: one merge places each block in the last
	// segment starting at or before it, when it lies inside.
	j := 0
	for _, b := range blocks {
		for j+1 < len(st.Segments) && st.Segments[j+1].Addr <= b.Addr {
			j++
		}
		if j < len(st.Segments) {
			g := &st.Segments[j]
			if g.Addr <= b.Addr && b.Addr+uint64(b.Size) <= g.Addr+uint64(g.Size) {
				g.Live = append(g.Live, b)
				continue
			}
		}
		st.Outside = append(st.Outside, b)
	}
	return st
}

// Resume returns a Summarizer whose state is st, as though it had been fed
// the events up to st.Event: a viewer keeps States every so many events and
// answers "what was live at event n" by resuming from the nearest one and
// feeding the events between. Its State and Levels are exact from then on;
// its Summary (peaks, counters, timeline) covers only the events fed after
// the resume, and is not meant to be used. The events fed after need not
// be numbered (Options.Numbered is ignored): the state's blocks are not.
func Resume(opt Options, st *State) *Summarizer {
	opt.Numbered = false
	s := NewSummarizer(opt)
	ev := trace.Event{Device: opt.Device}
	for i := range st.Segments {
		g := &st.Segments[i]
		ev.Kind, ev.Addr, ev.Size, ev.Stream = trace.KindSegmentAlloc, g.Addr, int64(g.Size), g.Stream
		if g.Expandable {
			ev.Kind = trace.KindSegmentMap
		}
		s.Event(&ev)
	}
	put := func(b *BlockState, stream uint64) {
		ev = trace.Event{Device: opt.Device, Kind: trace.KindAlloc, Addr: b.Addr, Size: int64(b.Requested),
			BlockSize: int64(b.Size), Stack: b.Stack, Stream: stream, TimeUs: b.AllocTimeUs}
		if b.Stack == BeforeRecording {
			ev.Stack, ev.Flags = trace.NoStack, trace.FlagReconstructed
		}
		if b.Pending {
			ev.Flags |= trace.FlagPending
		}
		s.Event(&ev)
		if lb := s.live.get(int64(b.Addr)); lb != nil {
			if info := s.live.info(lb); info != nil {
				info.allocN = b.AllocEvent
			}
			lb.recon = b.Stack == BeforeRecording
		}
	}
	for i := range st.Segments {
		g := &st.Segments[i]
		for j := range g.Live {
			put(&g.Live[j], g.Stream)
		}
	}
	for j := range st.Outside {
		put(&st.Outside[j], 0)
	}
	s.n = st.Event + 1
	return s
}
