package allocator

import "fmt"

// RawEvent is an event as an EventSink receives it: Event without its pool,
// which the sink is told once for each run of events in one pool, and with
// its block size and action in one word. 32 bytes: two to a cache line,
// four stores where Event's fields would take five, and a fifth less memory
// for the allocator's thread to write.
type RawEvent struct {
	Addr   uint64
	Size   int64
	Stream uint64
	// BlockAction holds BlockSize in its low 56 bits and Action in its top
	// byte (PackBlockAction). Block sizes are below 64 PiB (SetEventSink).
	BlockAction uint64
}

// ActFreeSync is an action only an EventSink sees: a synchronous free, the
// free_requested and free_completed of one block (same address, sizes and
// stream), one right after the other, in one RawEvent. Nearly every free
// is one, so the sink is written a third less.
const ActFreeSync Action = 9

// maxSinkBlock bounds the block sizes a RawEvent holds.
const maxSinkBlock = 1 << 56

// PackBlockAction is RawEvent.BlockAction for a block of bsize bytes and act.
func PackBlockAction(bsize int64, act Action) uint64 {
	return uint64(bsize) | uint64(act)<<56
}

// Action returns the event's action.
func (e *RawEvent) Action() Action { return Action(e.BlockAction >> 56) }

// BlockSize returns the event's block size (0 but for alloc and free_*).
func (e *RawEvent) BlockSize() int64 { return int64(e.BlockAction & (maxSinkBlock - 1)) }

// EventSink receives the allocator's events in runs, written by the
// allocator straight into memory the sink provides, for a recorder that
// must cost the allocator as little as possible. Most events take no call
// at all: the allocator stores their four words inline. An Observer costs
// a call per event and a copy of the event from the allocator's staging
// Event into the observer's memory, several times what a sink's stores
// cost (BenchmarkSinkFloor, record's BenchmarkRecordDrive).
//
// Writing into the sink's memory, rather than into a small buffer of the
// allocator's that the sink copies out, lets the stores' cache misses
// overlap the allocator's work.
type EventSink interface {
	// EventsWritten says that the first n events of the buffer last given
	// to the allocator are written, all of them in pool, and returns the
	// buffer for the next events, at least one event long. The allocator
	// calls it when the buffer is full, right after each segment_* and oom
	// event (they follow device calls, which take microseconds: a sink that
	// reads the clock here times them, and the events before them, well),
	// before an event in another pool than the run's, and from FlushEvents
	// and SetEventSink. A synchronous free comes as one event
	// (ActFreeSync), every other event as PyTorch records it.
	EventsWritten(n int, pool PoolID) []RawEvent
}

// sinkState is the allocator's side of an EventSink.
type sinkState struct {
	to  EventSink
	buf []RawEvent
	// n is the number of events written into buf. The block sites write
	// inline while n < room (sinkFits): room is one less than len(buf), so
	// that the event filling it takes sinkEvent, which hands the buffer
	// over. It is 0, so that every event takes emitSlow, when no sink is
	// set, and while a private pool exists or the run is not in the default
	// pool: the inline path does not look at pools (sinkRoom).
	n, room int
	// owner is the pool of the run's events, by its owner (nil for the
	// default pool): the small and large block pools of one PoolID are one
	// pool to the sink, and they alternate all the time.
	owner *privatePool
}

// SetEventSink makes s receive every later event, written into buf (at least
// one event long) and the buffers s returns; nil stops reporting. The events
// written for the sink set before are handed to it first. Setting a sink
// removes the Observer, if any. Segments must be smaller than 64 PiB, the
// largest block size a RawEvent holds: sinkEvent panics on one that is not.
func (a *Allocator) SetEventSink(s EventSink, buf []RawEvent) {
	a.FlushEvents()
	a.sink = sinkState{to: s}
	if s != nil {
		a.SetEventBuffer(buf)
		a.obs = nil
	}
	a.observed = s != nil || a.obs != nil
}

// SetEventBuffer makes later events go into buf (at least one event long).
// It is for a sink that adds events of its own between the allocator's
// (markers): it calls FlushEvents (events written and not handed over
// would be lost), adds its events, then gives the allocator the rest of its
// memory.
func (a *Allocator) SetEventBuffer(buf []RawEvent) {
	if len(buf) == 0 {
		panic("allocator: an empty event buffer")
	}
	a.sink.buf, a.sink.n = buf, 0
	a.sink.room = a.sinkRoom()
}

// sinkRoom is the room for the events of blocks to be written inline: none
// while a private pool exists or the run's events are not in the default
// pool, so that the inline path need not check an event's pool. Private
// pools come with
// CUDA graphs and MemPools, rare in a recording; while they exist every
// event takes sinkEvent, which checks.
func (a *Allocator) sinkRoom() int {
	if a.sink.to == nil || len(a.private) > 0 || a.sink.owner != nil {
		return 0
	}
	return len(a.sink.buf) - 1
}

// FlushEvents hands the sink the events written since its last call, if
// any.
func (a *Allocator) FlushEvents() {
	if a.sink.to != nil && a.sink.n > 0 {
		a.flushSink()
	}
}

// PendingEvents returns the number of events written and not yet handed to
// the sink: the sink's own count plus this is the number of events so far.
func (a *Allocator) PendingEvents() int { return a.sink.n }

// sinkFits reports whether an event of a block goes into the sink's buffer
// inline: a sink is set, the event does not fill the buffer, and no pool
// but the default one exists (sinkRoom). Inlined, with sinkPut, at the call
// sites of the events of blocks (alloc, free_requested, free_completed:
// nearly all events), which read
//
//	if a.observed {
//		if a.sinkFits() {
//			a.sinkPut(act, b, size)
//		} else {
//			a.emitSlow(act, b.addr, size, b.stream, pool, b.size)
//		}
//	}
//
// rather than call emit: emit doing this itself would be too big for the
// inliner, for which a call costs most of its budget.
func (a *Allocator) sinkFits() bool { return a.sink.n < a.sink.room }

// sinkPut writes the event of block b, with size the request, into the
// sink's buffer; sinkFits said it fits. Field by field: a composite literal
// is built on the stack and copied, twice the instructions.
func (a *Allocator) sinkPut(act Action, b *block, size int64) {
	s := &a.sink
	e := &s.buf[s.n]
	e.Addr, e.Size, e.Stream, e.BlockAction = b.addr, size, b.stream, PackBlockAction(b.size, act)
	s.n++
}

// sinkEvent writes an event into the sink's buffer, handing the run over
// as EventsWritten says.
func (a *Allocator) sinkEvent(act Action, addr uint64, size int64, stream uint64, pool *blockPool, bsize int64) {
	s := &a.sink
	var owner *privatePool
	if pool != nil {
		owner = pool.owner
	}
	if owner != s.owner {
		if s.n > 0 {
			a.flushSink()
		}
		s.owner = owner
	}
	if (act == ActSegmentAlloc || act == ActSegmentMap) && size >= maxSinkBlock {
		panic(fmt.Sprintf("allocator: a segment of %d bytes is too large for an event sink (64 PiB)", size))
	}
	e := &s.buf[s.n]
	e.Addr, e.Size, e.Stream, e.BlockAction = addr, size, stream, PackBlockAction(bsize, act)
	s.n++
	if s.n == len(s.buf) || act >= ActSegmentAlloc && act <= ActOOM {
		a.flushSink()
	} else {
		s.room = a.sinkRoom() // the pool may have changed either way
	}
}

// flushSink hands the sink the events written.
func (a *Allocator) flushSink() {
	s := &a.sink
	var id PoolID
	if s.owner != nil {
		id = s.owner.id
	}
	n := s.n
	s.n = 0
	a.SetEventBuffer(s.to.EventsWritten(n, id))
}
