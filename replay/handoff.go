package replay

import (
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// The hand-off of a replay's events to an observer that takes them as the
// model writes them (EmittedObserver): the allocator's event sink
// (allocator.EventSink) writes 32 bytes an event, a synchronous free's two
// events in one, straight into the observer's memory, where an Observer
// costs the model's thread two calls, a staging copy and a trace.Event of
// about a hundred bytes an event. What a trace.Event holds besides, the
// request's time and stack, the pool and the sequence number, is noted
// where it changes; the observer's side makes the trace.Events (Events).

// emittedRaw is how many allocator events an Emitted holds: up to twice
// as many trace events (synchronous frees), the pipeline's batch to the
// analysis; and emittedExtras bounds the events of the replay's own
// (restored blocks, empty_cache rows) it holds. Variables for the tests.
var emittedRaw, emittedExtras = 1024, 1024

// Emitted is a run of one device's replayed events as the model wrote
// them; Events makes them trace.Events. The zero Emitted is ready to use.
type Emitted struct {
	raw    []allocator.RawEvent // len: the events written
	device int32
	seq0   int64 // Seq of the first event
	// The time, stack and pool of the events before the first mark.
	time0  int64
	stack0 trace.StackID
	pool0  trace.PoolID
	marks  []emitMark  // in order of at
	pools  []poolMark  // in order of at
	extras []extraMark // in order of at
}

// emitMark says that the events from raw index at on are a request's at
// time, with stack.
type emitMark struct {
	at    int32
	stack trace.StackID
	time  int64
}

// poolMark says that the events from raw index at on are in pool.
type poolMark struct {
	at   int32
	pool trace.PoolID
}

// extraMark is an event the replay made itself, before raw index at.
type extraMark struct {
	at int32
	ev trace.Event
}

// An EmittedObserver is an Observer that takes the replayed events of a
// device as the model writes them. Run hands it an Emitted each time one
// is full, and at the end; Event gets only the events of a replay that
// has left the hand-off (a trace of several devices, from its second
// device's first event on: the devices' events interleave), after the
// Emitted handed before them.
type EmittedObserver interface {
	Observer
	// Emitted takes e, nil on the first call, and returns an Emitted to
	// fill next, which Run resets; with more false, e is the last (it
	// may hold no events) and it returns nil.
	Emitted(e *Emitted, more bool) *Emitted
}

// NewEmitted returns an Emitted with its memory made.
func NewEmitted() *Emitted {
	return &Emitted{raw: make([]allocator.RawEvent, 0, emittedRaw), marks: make([]emitMark, 0, emittedRaw+1)}
}

// Populate faults in e's memory without touching it (grow.Pages.Populate),
// for the model's thread, which fills it. It reports false where the
// system cannot.
func (e *Emitted) Populate() bool {
	return grow.PagesOf(e.raw).Populate(0, cap(e.raw)) && grow.PagesOf(e.marks).Populate(0, cap(e.marks))
}

// Empty reports whether e holds no events.
func (e *Emitted) Empty() bool { return len(e.raw) == 0 && len(e.extras) == 0 }

// Len is the number of events e holds.
func (e *Emitted) Len() int {
	n := len(e.raw) + len(e.extras)
	for i := range e.raw {
		if e.raw[i].BlockAction>>56 == uint64(allocator.ActFreeSync) {
			n++
		}
	}
	return n
}

// Events appends e's events to dst, as an Observer is handed them.
func (e *Emitted) Events(dst []trace.Event) []trace.Event {
	k := len(dst)
	if need := k + 2*len(e.raw) + len(e.extras); need > cap(dst) {
		grown := make([]trace.Event, k, max(need, 2*cap(dst)))
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:cap(dst)]
	seq, time, stack, pool := e.seq0, e.time0, e.stack0, e.pool0
	marks, pools, extras := e.marks, e.pools, e.extras
	for i := range e.raw {
		at := int32(i)
		for len(extras) > 0 && extras[0].at == at {
			dst[k] = extras[0].ev
			dst[k].Seq = seq
			seq, k, extras = seq+1, k+1, extras[1:]
		}
		if len(marks) > 0 && marks[0].at == at {
			time, stack, marks = marks[0].time, marks[0].stack, marks[1:]
		}
		if len(pools) > 0 && pools[0].at == at {
			pool, pools = pools[0].pool, pools[1:]
		}
		r := &e.raw[i]
		act := r.Action()
		o := &dst[k]
		// Field by field, as emitted writes them.
		o.Seq, o.TimeUs, o.Device, o.Kind = seq, time, e.device, rawKinds[act]
		o.Addr, o.Size, o.Stream, o.Pool = r.Addr, r.Size, r.Stream, pool
		o.Stack, o.Flags, o.BlockSize, o.DeviceUsed, o.Ref = stack, 0, r.BlockSize(), 0, 0
		seq, k = seq+1, k+1
		if act == allocator.ActFreeSync {
			dst[k] = *o
			dst[k].Seq, dst[k].Kind = seq, trace.KindFreeCompleted
			seq, k = seq+1, k+1
		}
	}
	for _, x := range extras {
		dst[k] = x.ev
		dst[k].Seq = seq
		seq, k = seq+1, k+1
	}
	return dst[:k]
}

// rawKinds is kinds with the sink's synchronous free, whose first event
// is a free_requested.
var rawKinds = func() (k [allocator.ActFreeSync + 1]trace.Kind) {
	copy(k[:], kinds[:])
	k[allocator.ActFreeSync] = trace.KindFreeRequested
	return k
}()

// handoff is a deviceReplay's side of an EmittedObserver.
type handoff struct {
	to  EmittedObserver
	cur *Emitted
	// pool is the pool of the allocator's latest events.
	pool trace.PoolID
	// The comparison with the recording, made lazily (checkPending):
	// the raw index and extras of cur checked, and the Seq of the next.
	chk, chkX int
	chkSeq    int64
	// drop: the Run failed; what the allocator hands over is dropped.
	drop bool
}

// startHandoff makes the allocator write r's events into the Emitted of
// obs, if it takes them so (EmittedObserver), and r may: a simulated
// device, whose segments fit an event sink's 56 bits of size, and no
// annotation (whose pool index marks pools as each event comes).
func (r *deviceReplay) startHandoff() {
	to, ok := r.obs.(EmittedObserver)
	if !ok || r.sim == nil || r.annotate || r.opts.TotalMemory >= 1<<56 {
		return
	}
	r.hand.to = to
	r.hand.cur = to.Emitted(nil, true)
	r.resetEmitted()
	r.a.SetEventSink(r, r.hand.cur.raw[:emittedRaw])
}

// resetEmitted readies the Emitted to fill, which follows the events
// handed so far.
func (r *deviceReplay) resetEmitted() {
	e := r.hand.cur
	if cap(e.raw) < emittedRaw {
		e.raw = make([]allocator.RawEvent, 0, emittedRaw)
	}
	if cap(e.marks) < emittedRaw+1 {
		e.marks = make([]emitMark, 0, emittedRaw+1)
	}
	e.raw, e.marks, e.pools, e.extras = e.raw[:0], e.marks[:0], e.pools[:0], e.extras[:0]
	e.device, e.seq0, e.time0, e.stack0, e.pool0 = r.device, r.outSeq, r.curTime, r.curStack, r.hand.pool
	r.hand.chk, r.hand.chkX, r.hand.chkSeq = 0, 0, r.outSeq
}

// EventsWritten is the allocator's EventSink: it wrote n more events into
// the Emitted being filled, all in pool. It hands the Emitted over once
// full.
func (r *deviceReplay) EventsWritten(n int, pool allocator.PoolID) []allocator.RawEvent {
	e := r.hand.cur
	if p := (trace.PoolID{A: pool.A, B: pool.B}); p != r.hand.pool && n > 0 {
		r.hand.pool = p
		e.pools = append(e.pools, poolMark{at: int32(len(e.raw)), pool: p})
	}
	e.raw = e.raw[:len(e.raw)+n]
	if len(e.raw) == emittedRaw {
		r.handOver()
	}
	return r.hand.cur.raw[len(r.hand.cur.raw):emittedRaw]
}

// handOver hands the Emitted being filled to the observer, its events
// compared with the recording first, and takes the next.
func (r *deviceReplay) handOver() {
	if !r.hand.drop {
		r.settleSeq()
		r.hand.cur = r.hand.to.Emitted(r.hand.cur, true)
	}
	r.resetEmitted()
}

// endHandoff hands over the last events, the allocator's first, and
// leaves the hand-off; then, if observe, the allocator reports to r as an
// Observer (a second device's events interleave with r's), else to no
// one. Without keep, after an error, the events are dropped.
func (r *deviceReplay) endHandoff(keep, observe bool) {
	h := &r.hand
	if h.to == nil {
		return
	}
	h.drop = !keep
	r.a.SetEventSink(nil, nil) // its last events into h.cur (EventsWritten)
	e := h.cur
	if keep {
		r.settleSeq()
	} else {
		e.raw, e.extras = e.raw[:0], e.extras[:0]
	}
	h.to.Emitted(e, false)
	*h = handoff{}
	if observe {
		r.a.SetObserver(r)
	}
}

// settleSeq compares the events of the Emitted being filled with the
// recording (checkPending) and sets outSeq past them: counted by the
// comparison, or else by Len.
func (r *deviceReplay) settleSeq() {
	h := &r.hand
	if !r.recorded {
		r.outSeq = h.cur.seq0 + int64(h.cur.Len())
		return
	}
	r.checkPending()
	r.outSeq = h.chkSeq + int64(len(h.cur.extras)-h.chkX)
}

// at sets the time and stack of the events the model emits next.
func (r *deviceReplay) at(time int64, stack trace.StackID) {
	r.curTime, r.curStack = time, stack
	if r.hand.to != nil {
		r.markAt()
	}
}

// markAt notes curTime and curStack for the events from the allocator's
// next on, where they change.
func (r *deviceReplay) markAt() {
	e := r.hand.cur
	at := int32(len(e.raw) + r.a.PendingEvents())
	m := len(e.marks)
	if m > 0 && e.marks[m-1].at == at {
		// The request before emitted nothing.
		m--
		e.marks = e.marks[:m]
	}
	time, stack := e.time0, e.stack0
	if m > 0 {
		time, stack = e.marks[m-1].time, e.marks[m-1].stack
	}
	if time != r.curTime || stack != r.curStack {
		e.marks = append(e.marks, emitMark{at: at, stack: r.curStack, time: r.curTime})
	}
}

// emitEvent hands the observer ev, an event the replay makes itself (an
// empty_cache row, a restored block), after the allocator's events so
// far. ev's Seq and Device are set here.
func (r *deviceReplay) emitEvent(ev *trace.Event) {
	if r.hand.to == nil {
		ev.Seq, ev.Device = r.outSeq, r.device
		r.outSeq++
		r.obs.Event(ev)
		return
	}
	if len(r.hand.cur.extras) == emittedExtras {
		r.a.FlushEvents() // which may hand the Emitted over (full)
		if len(r.hand.cur.extras) == emittedExtras {
			r.handOver()
			r.a.SetEventBuffer(r.hand.cur.raw[:emittedRaw])
		}
	}
	e := r.hand.cur
	x := extraMark{at: int32(len(e.raw) + r.a.PendingEvents()), ev: *ev}
	x.ev.Device = r.device
	e.extras = append(e.extras, x)
}

// checkPending compares the allocator's events written since the last
// check with the recording (check), in the hand-off: the comparison is
// made before the next recorded event is expected, or a mismatch noted,
// which is when an Observer's would have been made by then.
func (r *deviceReplay) checkPending() {
	h := &r.hand
	if h.to == nil || !r.recorded {
		return
	}
	e := h.cur
	end := len(e.raw) + r.a.PendingEvents()
	if h.chk >= end {
		return
	}
	raw := e.raw[:end]
	for ; h.chk < end; h.chk++ {
		for h.chkX < len(e.extras) && int(e.extras[h.chkX].at) <= h.chk {
			h.chkX, h.chkSeq = h.chkX+1, h.chkSeq+1
		}
		// The events that match the recorded ones expected take no call
		// (check's cases are the rest's).
		w := &raw[h.chk]
		q := r.expectHead
		if act := w.Action(); act != allocator.ActFreeSync {
			if q < len(r.expect) && matches(r.expect[q], rawKinds[act], w.Addr, w.Size, w.Stream) {
				r.popExpected(1)
			} else {
				r.check(h.chkSeq, rawKinds[act], w.Addr, w.Size, w.Stream)
			}
			h.chkSeq++
			continue
		}
		if q+1 < len(r.expect) && matches(r.expect[q], trace.KindFreeRequested, w.Addr, w.Size, w.Stream) &&
			matches(r.expect[q+1], trace.KindFreeCompleted, w.Addr, w.Size, w.Stream) {
			r.popExpected(2)
		} else {
			r.check(h.chkSeq, trace.KindFreeRequested, w.Addr, w.Size, w.Stream)
			r.check(h.chkSeq+1, trace.KindFreeCompleted, w.Addr, w.Size, w.Stream)
		}
		h.chkSeq += 2
	}
}

// matches reports whether the allocator's event of kind, at addr, of
// size, on stream, is the recorded w (an OOM's address is the device's
// free memory, not compared).
func matches(w *trace.Event, kind trace.Kind, addr uint64, size int64, stream uint64) bool {
	return w.Kind == kind && w.Size == size && w.Stream == stream && (w.Kind == trace.KindOOM || w.Addr == addr)
}

// popExpected takes the first n events expected, which matched.
func (r *deviceReplay) popExpected(n int) {
	r.expectHead += n
	if r.expectHead == len(r.expect) {
		r.expect, r.expectHead, r.expectKeptTo = r.expect[:0], 0, 0
	}
}
