package pipeline

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// A replay has three stages of about equal cost per event: decoding the
// trace, the allocator model, and the summaries of what it did. Each runs on
// its own goroutine and they hand events on in batches, so on two or more
// cores the stages overlap instead of adding up. A batch is big enough that
// the hand-off (a channel send) vanishes against the work on its events, and
// enough are in flight that a stage's stall (a collection, a burst of
// splits) does not stop the others; memory stays bounded by batchRows ×
// inFlight events (about 3 MiB) whatever the trace's length. The
// replayed events go to the analysis in batches of behindRows, half as
// large: the model writes them into a replay.Emitted of its batch first
// (half as many allocator events, 96 KiB), which the batch holds besides.
const (
	batchRows  = 4096
	behindRows = 2048
	inFlight   = 8
)

// batch is a run of events and the stack table they refer to. The table is
// a read-only view of the reader's (trace.Reader.Stacks), valid for every
// stack of the events handed on so far.
type batch struct {
	evs    []trace.Event
	stacks []trace.Stack
	// emitted is where a replay's model writes its events
	// (replay.EmittedObserver), kept with the batch; raw says the batch's
	// events are there, to be made into evs by the goroutine that numbers
	// them (fanout.numberAhead).
	emitted *replay.Emitted
	raw     bool
	// refs counts the readers of a readAhead's batch yet to finish with
	// it: the last gives it back to the pool.
	refs atomic.Int32
}

// batchPool recycles batches of rows events between two stages.
type batchPool struct {
	ch   chan *batch
	rows int
}

func newBatchPool(rows int) batchPool {
	return batchPool{ch: make(chan *batch, inFlight+2), rows: rows}
}

func (p batchPool) get() *batch {
	if b := p.take(); b != nil {
		return b
	}
	return &batch{evs: make([]trace.Event, 0, p.rows)}
}

// take returns a batch of the pool, emptied, or nil if none waits.
func (p batchPool) take() *batch {
	select {
	case b := <-p.ch:
		b.evs, b.raw = b.evs[:0], false
		return b
	default:
		return nil
	}
}

// fill puts n new batches into p, their pages faulted in without being
// touched (grow.Pages.Populate), for a stage whose thread would otherwise
// take a page fault a page as it first fills each: the model's, which
// fills the analysis's batches' Emitted (860 of its 1,000 faults on
// small.trace were the batches' events it filled itself before), or the
// reader's (readFill). Where the system cannot, it puts none.
func (p batchPool) fill(n int) { p.fillWith(n, true) }

// fillWith is fill, the batches with an Emitted or without (the reader's
// have none: the replay fills the analysis's).
func (p batchPool) fillWith(n int, emitted bool) {
	for range n {
		b := &batch{evs: make([]trace.Event, 0, p.rows)}
		if !grow.PagesOf(b.evs).Populate(0, p.rows) {
			return
		}
		if emitted {
			if b.emitted = replay.NewEmitted(); !b.emitted.Populate() {
				return
			}
		}
		p.put(b)
	}
}

// readFill is how many batches of the reader's pool a replay of a trace
// file of size bytes has made and faulted in on a goroutine of their own
// (batchPool.fillWith) as it starts: about what the stages hold at once
// (the pool's room), fewer for a file of fewer batches, at eventBytes an
// event. The reader's thread, the head of the stages, otherwise took a
// fault a page as it first filled each.
func readFill(size int64) int {
	return int(min(int64(inFlight+2), size/(eventBytes*batchRows)+1))
}

// fillBehind fills the reader's pool with n batches on a goroutine of
// its own; a variable for the tests.
var fillBehind = func(p batchPool, n int) { go p.fillWith(n, false) }

// eventBytes is about the bytes of a trace file an event takes, stacks
// included, on real and scale traces.
const eventBytes = 85

func (p batchPool) put(b *batch) {
	select {
	case p.ch <- b:
	default:
	}
}

// readAhead decodes a trace on its own goroutine, folding every event into
// facts, and serves the events to one or more readers (taps), each a
// replay.Source of all of them: the replays of one trace under several
// settings read and number it once. Its own Source methods are its first
// tap's. Event returns a pointer that is valid until the next call to
// Next, as trace.Reader's is; the events are shared, and read only.
type readAhead struct {
	*tap
	taps []*tap
	pool batchPool
	stop chan struct{}
	done chan struct{}
	err  error // set by the goroutine before it closes the taps
	// valid: serve only events of known kinds.
	valid bool
	// number: give the events their blocks' numbers (replay.BlockNumbers)
	// before handing them on, for a replay.
	number bool
	// timed: measure the goroutines' CPU time into read and numbered
	// (OnStages), which the caller reads after close.
	timed          bool
	read, numbered time.Duration
	decoders       time.Duration   // the trace's decoders' CPU (trace.Reader.DecodeAhead), beside read
	decoded        int             // and the record batches they decoded
	numberParts    []time.Duration // the numbering's parts' (numbered is its own goroutine's)
	// top is the greatest block number handed on so far, when number is
	// set; each tap's wake is told when it grows (modelPrep).
	top atomic.Int32
}

// tap is one reader of a readAhead's batches.
type tap struct {
	ra       *readAhead
	full     chan *batch
	gone     chan struct{} // closed by leave: send it nothing more
	leftOnce sync.Once
	cur      *batch
	i        int
	stacks   []trace.Stack // of the latest batch served
	wake     chan struct{} // readAhead.top has grown
}

// startReadAhead starts reading rd for taps readers (at least 1). The
// caller must call close before it closes rd. When onlyValid is set,
// events of kinds this version does not know are counted in facts but not
// served. When number is set, the events carry their blocks' numbers
// (replay.BlockNumbers, for a replay with replay.Options.Numbered): a
// goroutine of its own, between the decoding and the taps, finds each
// free's block by address, so that the replay's need not. With fill > 0,
// another goroutine makes that many batches for the reader, their pages
// faulted in (batchPool.fillWith, readFill).
func startReadAhead(ctx context.Context, rd *trace.Reader, facts *trace.Facts, onlyValid, number, timed bool, taps, fill int) *readAhead {
	ra := &readAhead{
		timed:  timed,
		pool:   newBatchPool(batchRows),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		valid:  onlyValid,
		number: number,
	}
	for range max(taps, 1) {
		ra.taps = append(ra.taps, &tap{ra: ra, full: make(chan *batch, inFlight), gone: make(chan struct{}), wake: make(chan struct{}, 1)})
	}
	ra.tap = ra.taps[0]
	if fill > 0 {
		fillBehind(ra.pool, fill)
	}
	go ra.run(ctx, rd, facts)
	return ra
}

// run decodes rd's batches and hands them to the taps, or, when the
// events are numbered, to numberAll, which hands them on. On many cores
// (replay.NumberParts) the numbering is in parts: run hands each batch to
// them (replay.PartNumbers.Start: its one pass over the batch while the
// batch is in this core's cache) before numberAll, which waits for them.
func (ra *readAhead) run(ctx context.Context, rd *trace.Reader, facts *trace.Facts) {
	var numq chan *batch
	var parts *replay.PartNumbers
	if ra.number {
		if k := replay.NumberParts(runtime.GOMAXPROCS(0)); k > 1 {
			parts = replay.NewPartNumbers(k, ra.timed)
		}
		numq = make(chan *batch, numberAhead)
		numbered := make(chan struct{})
		go ra.numberAll(numq, parts, numbered)
		defer func() {
			if parts != nil {
				parts.Close() // after the last Start
				ra.numberParts = parts.PartCPU()
			}
			close(numq)
			<-numbered // which closes the taps
			close(ra.done)
		}()
	} else {
		defer close(ra.done)
		defer ra.closeTaps()
	}
	clock := startClock(ra.timed)
	rd.DecodeAhead(decoders(runtime.GOMAXPROCS(0)), ra.timed)
	defer func() {
		ra.read = clock.stop()
		ra.decoders, ra.decoded, _ = rd.DecodeCPU()
	}()
	send := func(b *batch) bool {
		b.stacks = rd.Stacks()
		if numq != nil {
			if parts != nil {
				parts.Start(b.evs)
			}
			select {
			case numq <- b:
				return true
			case <-ra.stop:
				return false
			}
		}
		return ra.toTaps(b)
	}
	b := ra.pool.get()
	for {
		// The events are decoded into the batch's next rows, each of
		// which they keep unless of a kind not served.
		n := len(b.evs)
		k := rd.ReadEvents(b.evs[n:batchRows])
		if k == 0 {
			break
		}
		evs := b.evs[n : n+k]
		for i := range evs {
			facts.Add(&evs[i])
		}
		if ra.valid && facts.Unknown > 0 {
			evs = slices.DeleteFunc(evs, func(ev trace.Event) bool { return !ev.Kind.Valid() })
		}
		b.evs = b.evs[:n+len(evs)]
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

// decoders is how many goroutines decode a trace's record batches ahead of
// the reader's (trace.Reader.DecodeAhead) at GOMAXPROCS procs: half the
// cores, at most 4, which keep ahead of the reader's goroutine (it then
// only copies the events and folds them into the facts); none below 8
// cores, where the replay's four stages and the numbering's parts already
// take the cores, and the decoders' CPU (10-25% more than the plain
// reader's) would come out of theirs.
func decoders(procs int) int {
	if procs < 8 {
		return 0
	}
	return min(4, procs/2)
}

// numberAhead is how many decoded batches wait for the numbering: the
// decoding and the numbering are two stages, each on its own goroutine
// (or its parts'), so that on many cores neither adds to the other
// (together they cost about what the model does, on seed1m.trace more).
// With parts, the parts may have this many and two more to number.
const numberAhead = 2

// numberAll numbers the events of each batch of numq
// (replay.BlockNumbers), or with parts waits until the parts have
// numbered it, and hands the batch to the taps, until numq is closed or
// the readAhead stopped; then it closes the taps and numbered.
func (ra *readAhead) numberAll(numq <-chan *batch, parts *replay.PartNumbers, numbered chan<- struct{}) {
	defer close(numbered)
	defer ra.closeTaps()
	clock := startClock(ra.timed)
	defer func() { ra.numbered = clock.stop() }()
	var nums replay.BlockNumbers
	for b := range numq {
		if parts != nil {
			parts.Done()
		} else {
			nums.Number(b.evs)
		}
		ra.noteTop(b.evs)
		if !ra.toTaps(b) {
			return
		}
	}
}

// noteTop raises top to the greatest number of evs, and wakes the taps'
// prefaulting if it grew.
func (ra *readAhead) noteTop(evs []trace.Event) {
	top := ra.top.Load()
	hi := top
	for i := range evs {
		hi = max(hi, evs[i].Ref)
	}
	if hi == top {
		return
	}
	ra.top.Store(hi)
	for _, t := range ra.taps {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// toTaps hands b to every tap that still reads, and reports false if the
// readAhead stopped meanwhile.
func (ra *readAhead) toTaps(b *batch) bool {
	b.refs.Store(int32(len(ra.taps)))
	for _, t := range ra.taps {
		select {
		case t.full <- b:
		case <-t.gone:
			ra.release(b)
		case <-ra.stop:
			return false
		}
	}
	return true
}

// closeTaps tells the taps that no batch follows.
func (ra *readAhead) closeTaps() {
	for _, t := range ra.taps {
		close(t.full)
	}
}

// release is a tap's end with b: the last one gives it back to the pool.
func (ra *readAhead) release(b *batch) {
	if b.refs.Add(-1) == 0 {
		ra.pool.put(b)
	}
}

// Next advances to the next event.
func (t *tap) Next() bool {
	t.i++
	for t.cur == nil || t.i >= len(t.cur.evs) {
		if t.cur != nil {
			t.ra.release(t.cur)
			t.cur = nil
		}
		b, ok := <-t.full
		if !ok {
			return false
		}
		t.cur, t.i, t.stacks = b, 0, b.stacks
	}
	return true
}

// Event returns the current event.
func (t *tap) Event() *trace.Event { return &t.cur.evs[t.i] }

// NextBatch returns the events of the next decoded batch not yet served,
// valid until the next call to NextBatch or Next (replay.BatchSource: the
// replay then takes them without a call per event). It returns an empty
// slice at the end.
func (t *tap) NextBatch() []trace.Event {
	if t.cur != nil && t.i+1 < len(t.cur.evs) {
		evs := t.cur.evs[t.i+1:] // what Next left of the current batch
		t.i = len(t.cur.evs) - 1
		return evs
	}
	if !t.Next() {
		return nil
	}
	t.i = len(t.cur.evs) - 1
	return t.cur.evs
}

// Stacks returns the stack table for the events served so far.
func (t *tap) Stacks() []trace.Stack { return t.stacks }

// Err returns the reader's error once Next has returned false.
func (t *tap) Err() error { return t.ra.err }

// leave says that t reads no more (its replay ended, perhaps early): the
// reader then hands its batches to the other taps only.
func (t *tap) leave() {
	t.leftOnce.Do(func() {
		close(t.gone)
		if t.cur != nil {
			t.ra.release(t.cur)
			t.cur = nil
		}
	})
}

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
	src  *tap // whose stack table covers the emitted events
	full chan *batch
	pool batchPool
	cur  *batch
	// filling is the batch whose Emitted the replay fills (Emitted).
	filling *batch
	done    chan struct{}
	cpu     time.Duration // the goroutine's CPU time, when timed (after close)
	faults  int64         // and its thread's minor faults
}

// startAnalyzeBehind starts the fanout f on its own goroutine, behind a
// replay whose events come from src. With prefault, another goroutine
// makes the batches the replay will fill, their pages faulted in
// (batchPool.fill), so that the model's thread does not first touch them.
func startAnalyzeBehind(f *fanout, src *tap, timed, prefault bool) *analyzeBehind {
	a := &analyzeBehind{f: f, src: src, full: make(chan *batch, inFlight), pool: newBatchPool(behindRows), done: make(chan struct{})}
	a.cur = a.pool.get()
	if prefault {
		go a.pool.fill(inFlight + 1)
	}
	numbered := f.numberAhead(a.full, timed)
	go func() {
		defer close(a.done)
		clock := startClock(timed)
		defer func() { a.cpu, a.faults = clock.stopFaults() }()
		for b := range numbered {
			f.numbersDone()
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
	if len(a.cur.evs) == behindRows {
		a.flush()
		a.cur = a.pool.get()
	}
}

func (a *analyzeBehind) flush() {
	a.cur.stacks = a.src.Stacks()
	a.full <- a.cur
}

// Emitted hands on e, the model's events as it wrote them
// (replay.EmittedObserver), after the events queued before, and returns
// the next to fill: each is a batch's of the pool.
func (a *analyzeBehind) Emitted(e *replay.Emitted, more bool) *replay.Emitted {
	if b := a.filling; b != nil {
		a.filling = nil
		if e.Empty() {
			a.pool.put(b)
		} else {
			if len(a.cur.evs) > 0 {
				a.flush()
				a.cur = a.pool.get()
			}
			b.raw, b.stacks = true, a.src.Stacks()
			a.full <- b
		}
	}
	if !more {
		return nil
	}
	// A batch of the pool, else one whose events are made where they are
	// filled (replay.Emitted.Events, on the numbering's goroutine), not
	// on the model's thread, which needs only the Emitted.
	b := a.pool.take()
	if b == nil {
		b = new(batch)
	}
	if b.emitted == nil {
		b.emitted = replay.NewEmitted()
	}
	a.filling = b
	return b.emitted
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
