package pipeline

import (
	"context"
	"time"

	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// A replay has three stages of about equal cost per event: decoding the
// trace, the allocator model, and the summaries of what it did. Each runs on
// its own goroutine and they hand events on in batches, so on two or more
// cores the stages overlap instead of adding up. A batch is big enough that
// the hand-off (a channel send) vanishes against the work on its events, and
// few are in flight, so memory stays bounded by batchRows × inFlight events
// whatever the trace's length.
const (
	batchRows = 1024
	inFlight  = 4
)

// batch is a run of events and the stack table they refer to. The table is
// a read-only view of the reader's (trace.Reader.Stacks), valid for every
// stack of the events handed on so far.
type batch struct {
	evs    []trace.Event
	stacks []trace.Stack
}

// batchPool recycles batches between two stages.
type batchPool chan *batch

func newBatchPool() batchPool { return make(batchPool, inFlight+2) }

func (p batchPool) get() *batch {
	select {
	case b := <-p:
		b.evs = b.evs[:0]
		return b
	default:
		return &batch{evs: make([]trace.Event, 0, batchRows)}
	}
}

func (p batchPool) put(b *batch) {
	select {
	case p <- b:
	default:
	}
}

// readAhead decodes a trace on its own goroutine, folding every event into
// facts, and serves the events as a replay.Source. Event returns a pointer
// that is valid until the next call to Next, as trace.Reader's is.
type readAhead struct {
	full   chan *batch
	pool   batchPool
	stop   chan struct{}
	done   chan struct{}
	cur    *batch
	i      int
	stacks []trace.Stack // of the latest batch served
	err    error         // set by the goroutine before it closes full
	valid  bool          // serve only events of known kinds
	// number: give the events their blocks' numbers (replay.BlockNumbers)
	// before handing them on, for a replay.
	number bool
	// timed: measure the goroutine's CPU time into read and numbered
	// (OnStages), which the caller reads after close.
	timed          bool
	read, numbered time.Duration
}

// startReadAhead starts reading rd. The caller must call close before it
// closes rd. When onlyValid is set, events of kinds this version does not
// know are counted in facts but not served. When number is set, the events
// carry their blocks' numbers (replay.BlockNumbers, for a replay with
// replay.Options.Numbered): the reader's goroutine finds each free's block
// by address, so that the replay's need not.
func startReadAhead(ctx context.Context, rd *trace.Reader, facts *trace.Facts, onlyValid, number, timed bool) *readAhead {
	ra := &readAhead{
		timed:  timed,
		full:   make(chan *batch, inFlight),
		pool:   newBatchPool(),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		valid:  onlyValid,
		number: number,
	}
	go ra.run(ctx, rd, facts)
	return ra
}

func (ra *readAhead) run(ctx context.Context, rd *trace.Reader, facts *trace.Facts) {
	defer close(ra.done)
	defer close(ra.full)
	clock := startClock(ra.timed)
	defer func() { ra.read += clock.stop() }()
	var nums replay.BlockNumbers
	send := func(b *batch) bool {
		b.stacks = rd.Stacks()
		if ra.number {
			ra.read += clock.lap()
			nums.Number(b.evs)
			ra.numbered += clock.lap()
		}
		select {
		case ra.full <- b:
			return true
		case <-ra.stop:
			return false
		}
	}
	b := ra.pool.get()
	for {
		// Each event is decoded into the batch's next row, which it
		// takes unless it is of a kind not served.
		n := len(b.evs)
		ev := &b.evs[:n+1][n]
		if !rd.NextTo(ev) {
			break
		}
		facts.Add(ev)
		if ra.valid && !ev.Kind.Valid() {
			continue
		}
		b.evs = b.evs[:n+1]
		if len(b.evs) == batchRows {
			if !send(b) {
				return
			}
			if err := ctx.Err(); err != nil {
				ra.err = err
				return
			}
			b = ra.pool.get()
		}
	}
	if len(b.evs) > 0 && !send(b) {
		return
	}
	ra.err = rd.Err()
	facts.Truncated = rd.Truncated()
}

// Next advances to the next event.
func (ra *readAhead) Next() bool {
	ra.i++
	for ra.cur == nil || ra.i >= len(ra.cur.evs) {
		if ra.cur != nil {
			ra.pool.put(ra.cur)
			ra.cur = nil
		}
		b, ok := <-ra.full
		if !ok {
			return false
		}
		ra.cur, ra.i, ra.stacks = b, 0, b.stacks
	}
	return true
}

// Event returns the current event.
func (ra *readAhead) Event() *trace.Event { return &ra.cur.evs[ra.i] }

// NextBatch returns the events of the next decoded batch not yet served,
// valid until the next call to NextBatch or Next (replay.BatchSource: the
// replay then takes them without a call per event). It returns an empty
// slice at the end.
func (ra *readAhead) NextBatch() []trace.Event {
	if ra.cur != nil && ra.i+1 < len(ra.cur.evs) {
		evs := ra.cur.evs[ra.i+1:] // what Next left of the current batch
		ra.i = len(ra.cur.evs) - 1
		return evs
	}
	if !ra.Next() {
		return nil
	}
	ra.i = len(ra.cur.evs) - 1
	return ra.cur.evs
}

// Stacks returns the stack table for the events served so far.
func (ra *readAhead) Stacks() []trace.Stack { return ra.stacks }

// Err returns the reader's error once Next has returned false.
func (ra *readAhead) Err() error { return ra.err }

// close stops the goroutine, if it still runs, and waits for it. After
// close, facts and the reader belong to the caller again.
func (ra *readAhead) close() {
	select {
	case <-ra.stop:
	default:
		close(ra.stop)
	}
	<-ra.done
}

// analyzeBehind runs a fanout on its own goroutine, fed in batches with the
// events a replay emits.
type analyzeBehind struct {
	f    *fanout
	src  *readAhead // whose stack table covers the emitted events
	full chan *batch
	pool batchPool
	cur  *batch
	done chan struct{}
	cpu  time.Duration // the goroutine's CPU time, when timed (after close)
}

func startAnalyzeBehind(f *fanout, src *readAhead, timed bool) *analyzeBehind {
	a := &analyzeBehind{f: f, src: src, full: make(chan *batch, inFlight), pool: newBatchPool(), done: make(chan struct{})}
	a.cur = a.pool.get()
	go func() {
		defer close(a.done)
		clock := startClock(timed)
		defer func() { a.cpu = clock.stop() }()
		for b := range a.full {
			f.stacks = b.stacks
			f.events(b.evs)
			a.pool.put(b)
		}
	}()
	return a
}

// Slot returns the room for the next event in the batch being filled
// (replay.SlotObserver): the replay writes its events there.
func (a *analyzeBehind) Slot() *trace.Event {
	n := len(a.cur.evs)
	return &a.cur.evs[:n+1][n]
}

// Event queues ev for the fanout: it takes the event in the slot it lent,
// and a copy of any other.
func (a *analyzeBehind) Event(ev *trace.Event) {
	if n := len(a.cur.evs); ev == &a.cur.evs[:n+1][n] {
		a.cur.evs = a.cur.evs[:n+1]
	} else {
		a.cur.evs = append(a.cur.evs, *ev)
	}
	if len(a.cur.evs) == batchRows {
		a.flush()
		a.cur = a.pool.get()
	}
}

func (a *analyzeBehind) flush() {
	a.cur.stacks = a.src.Stacks()
	a.full <- a.cur
}

// close hands on the last events and waits until the fanout has seen all.
func (a *analyzeBehind) close() {
	if len(a.cur.evs) > 0 {
		a.flush()
	}
	a.cur = nil
	close(a.full)
	<-a.done
}
