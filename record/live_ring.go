package record

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// The live recorder splits the work as Go's execution tracer does. On the
// allocator's path an event is four stores into a preallocated chunk (a
// synchronous free's two events are one: allocator.ActFreeSync), made by the
// allocator itself (allocator.EventSink: no call), and every so many events
// (clockPeriod) the recorder reads the clock (recorder.EventsWritten): no
// allocation, no call into the trace writer. What changes rarely (the
// statement's stack, NVML's reading, the pool) and the clock reads are kept
// beside the events as (index, value) marks. Full chunks go to an encoder
// goroutine that places every event in time, lays the events out as the
// trace's columns and encodes them in batches (trace.Writer.WriteColumns),
// then hands the chunk back; the trace writer's own goroutine makes the
// write calls, and syncs the file behind them (trace.Create). On a machine
// with spare cores the encoding and the writing overlap the allocator, and
// neither the write calls nor the syncs delay the encoder; memory stays
// bounded: ringChunks chunks, the one batch being filled and the writer's
// blocks. When the encoder falls behind, the allocator waits for a chunk.
//
// What the allocator's thread pays beyond the stores is mostly memory
// traffic and the hand-over of chunks, and both are kept small:
//
//   - Chunks are reused last-returned first (encoder.free is a stack), so
//     that the few in use stay in the allocator core's L2 cache; reused in
//     turn, a ring of them would stream through it.
//   - A hand-over is a send into a buffered channel that nobody waits on:
//     while chunks come, the encoder takes them every pollEvery instead of
//     being woken for each, since waking a parked goroutine costs the
//     sender a futex call and an inter-processor interrupt.
//   - The first chunks are made, and their pages faulted in, before the
//     workload starts (firstChunks).

const (
	// chunkEvents is the number of events per chunk (32 bytes each, 128 KiB
	// a chunk), and ringChunks the most chunks in circulation (8 MiB):
	// 256K events of lead, more than the allocator makes in a poll period
	// and the time the encoder takes to write a batch, so that the
	// allocator does not wait for it on a machine with a spare core. In use
	// at a time are the chunks handed over since the last poll and the one
	// being filled: about 1 MiB at 20-30 million events a second. Smaller
	// chunks mean more hand-overs, larger ones no less cost.
	chunkEvents = 4096
	ringChunks  = 64
	// firstChunks are made, and their memory touched, when the recording
	// starts, more than are in use at full speed, so that the allocator's
	// thread seldom makes one: a chunk made during the run costs it 32 page
	// faults.
	firstChunks = 16
	// pollEvery is how often a busy encoder takes the chunks handed over
	// (a shorter timer would not fire sooner: an idle Go thread waits for
	// timers in whole milliseconds on Linux); one that found none
	// idlePolls times in a row waits to be woken by the next instead, so
	// that an idle recording costs nothing.
	pollEvery = time.Millisecond
	idlePolls = 16
	// The clock is read every `every` events, about clockPeriod apart: the
	// recorder sets every after each read from the pace of the events
	// before it, between 1 and maxClockEvery. A read, with the hand-over of
	// the run around it (the allocator's slow path, EventsWritten, the
	// pace), costs the allocator's thread about 200 ns, four events' worth;
	// events between reads are placed in time by the encoder (stampTimes),
	// within the reads around them. On a warm allocator (40-90 ns an event)
	// that is a read every 550-1024 events, and times within clockPeriod of
	// the truth, far finer than a memory timeline needs, and reading more
	// often costs the allocator's thread visibly more. Where events are
	// sparse (a program computing between its allocations) every event
	// reads the clock and its time is exact.
	clockPeriod   = 50 * time.Microsecond
	maxClockEvery = 1024
	// actSnapshot is the Action of a snapshot marker in a chunk; the
	// allocator's own actions are 1 to 8.
	actSnapshot allocator.Action = 255
)

// mark is a value that holds from event i of a chunk on: a clock read (ns
// since the start), a stack id, an NVML reading, a pool.
type mark struct {
	i int
	v int64
}

// chunk is a run of consecutive events. Its last event is timed, except in
// the last chunk of a recording, whose end time bounds the rest.
type chunk struct {
	ev      []allocator.RawEvent // as the allocator writes them; the pool is in the marks
	n       int
	times   []mark // clock reads, in event order
	stacks  []mark // stack changes
	used    []mark // NVML reading changes
	pools   []mark // pool changes: the index in poolIDs
	poolIDs []allocator.PoolID
	// flush asks the encoder to write its batch once the chunk is in it (the
	// batch is old); end is the recording's end, for a last chunk whose last
	// event is untimed (0 otherwise).
	flush bool
	end   int64
}

func (c *chunk) reset() {
	c.n, c.flush, c.end = 0, false, 0
	c.times, c.stacks, c.used, c.pools, c.poolIDs = c.times[:0], c.stacks[:0], c.used[:0], c.pools[:0], c.poolIDs[:0]
}

// encoder is the goroutine that turns chunks into the trace's batches.
type encoder struct {
	w      *trace.Writer
	t0     time.Time
	baseUs int64 // t0, µs since the Unix epoch
	batch  int   // rows per batch

	full chan *chunk // recorder -> encoder: a buffered send, see run
	done chan struct{}
	wake chan struct{} // kick: take the chunks handed over now
	// free holds the chunks the encoder is done with, as a stack: the
	// recorder takes the one returned last, still in its core's cache (see
	// above). freed wakes a recorder that waits for one (waiting).
	freeMu  sync.Mutex
	free    []*chunk
	waiting bool
	freed   chan struct{}
	nmade   int // chunks made so far (by newEncoder, then the recorder)
	waits   int // times the recorder waited for a chunk
	// flushReq (the recorder's) asks the recorder to hand over its partial
	// chunk: the encoder's ticker sets it when no batch was written for half
	// of flushEvery, so a batch reaches the file within flushEvery even when
	// events trickle.
	flushReq   *atomic.Bool
	flushEvery time.Duration
	lastWrite  time.Duration // since the start

	// extra counts the rows beyond one per chunk event: the second of each
	// synchronous free's (ActFreeSync) encoded so far.
	extra atomic.Int64

	cols trace.Columns // the batch being filled
	// clearPools and clearUsed say that the batch's pool or NVML columns
	// hold values other than 0.
	clearPools, clearUsed bool
	times                 []int64 // a chunk's event times, ns since the start
	// Carried from chunk to chunk: the stack and NVML reading in force, the
	// last clock read (ns since the start) and the per-event time of the last
	// window between two reads.
	stack    trace.StackID
	used     int64
	pool     allocator.PoolID
	lastT    int64
	lastRate float64

	mu  sync.Mutex
	err error // first write error
	bad atomic.Bool
}

// newEncoder starts the encoder: batches of batch events into w.
func newEncoder(w *trace.Writer, t0 time.Time, ordinal int32, batch int, flushEvery time.Duration, flushReq *atomic.Bool) *encoder {
	e := &encoder{
		w: w, t0: t0, baseUs: t0.UnixMicro(), batch: batch, flushEvery: flushEvery, flushReq: flushReq,
		full: make(chan *chunk, ringChunks), done: make(chan struct{}), wake: make(chan struct{}, 1), freed: make(chan struct{}, 1),
		stack: trace.NoStack, lastRate: -1,
	}
	e.cols.Device = ordinal
	for range firstChunks {
		c := newChunk()
		for i := 0; i < len(c.ev); i += 4096 / int(unsafe.Sizeof(allocator.RawEvent{})) {
			c.ev[i].Addr = 0 // fault its pages in now
		}
		e.free = append(e.free, c)
	}
	e.nmade = len(e.free)
	go e.run()
	return e
}

func newChunk() *chunk { return &chunk{ev: make([]allocator.RawEvent, chunkEvents)} }

// chunk returns an empty chunk for the recorder: the one returned last, or
// a new one while fewer than ringChunks exist, or else the next one
// returned.
func (e *encoder) chunk() *chunk {
	for {
		e.freeMu.Lock()
		if n := len(e.free); n > 0 {
			c := e.free[n-1]
			e.free = e.free[:n-1]
			e.freeMu.Unlock()
			return c
		}
		if e.nmade < ringChunks {
			e.nmade++
			e.freeMu.Unlock()
			return newChunk()
		}
		e.waiting = true
		e.freeMu.Unlock()
		e.waits++
		e.kick() // rather than wait for its next poll
		<-e.freed
	}
}

// put returns a chunk the encoder is done with.
func (e *encoder) put(c *chunk) {
	c.reset()
	e.freeMu.Lock()
	e.free = append(e.free, c)
	wake := e.waiting
	e.waiting = false
	e.freeMu.Unlock()
	if wake {
		e.freed <- struct{}{}
	}
}

// kick makes a polling encoder take the chunks handed over now.
func (e *encoder) kick() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// run encodes the chunks handed over until full is closed. It starts
// parked, waiting on full: the first hand-over wakes it. From then on it
// polls: every pollEvery (or when kicked) it encodes whatever was handed
// over, so that a hand-over, while chunks come, wakes nothing (see above).
// After idlePolls polls that found nothing it parks again.
func (e *encoder) run() {
	defer close(e.done)
	period := e.flushEvery / 2
	tick := time.NewTicker(period)
	defer tick.Stop()
	poll := time.NewTimer(pollEvery)
	defer poll.Stop()
	checkFlush := func() {
		if time.Since(e.t0)-e.lastWrite >= period {
			e.flushReq.Store(true)
		}
	}
	idle := idlePolls
	// take encodes a chunk received from full; false once full is closed.
	take := func(c *chunk, ok bool) bool {
		if ok {
			e.encode(c)
			idle = 0
		}
		return ok
	}
	for {
		if idle >= idlePolls {
			select {
			case c, ok := <-e.full:
				if !take(c, ok) {
					return
				}
			case <-tick.C:
				checkFlush()
			}
			continue
		}
		poll.Reset(pollEvery)
		select {
		case <-poll.C:
		case <-e.wake:
		case <-tick.C:
			checkFlush()
		}
		idle++
	drain:
		for {
			select {
			case c, ok := <-e.full:
				if !take(c, ok) {
					return
				}
			default:
				break drain
			}
		}
	}
}

// encode adds c to the batch (unless writing failed), writes the batch if c
// asks for it, and returns c to the recorder.
func (e *encoder) encode(c *chunk) {
	if !e.bad.Load() {
		e.add(c)
		if c.flush {
			e.writeBatch()
		}
	}
	e.put(c)
}

// wait returns once every chunk handed over is written.
func (e *encoder) wait() { <-e.done }

// failed returns the first write error, if any. Safe from any goroutine.
func (e *encoder) failed() error {
	if !e.bad.Load() {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

func (e *encoder) fail(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
	e.bad.Store(true)
}

// add places c's events in time and appends them to the batch, writing the
// batch each time it is full.
func (e *encoder) add(c *chunk) {
	if cap(e.times) < c.n {
		e.times = make([]int64, c.n)
	}
	times := e.times[:c.n]
	e.stampTimes(times, c.times, c.end)
	stacks, used, pools := c.stacks, c.used, c.pools
	for k := 0; k < c.n; {
		// The run of events up to the next stack, NVML or pool change, or
		// the end of the batch, shares the stack, reading and pool.
		for len(stacks) > 0 && stacks[0].i <= k {
			e.stack = trace.StackID(stacks[0].v)
			stacks = stacks[1:]
		}
		for len(used) > 0 && used[0].i <= k {
			e.used = used[0].v
			used = used[1:]
		}
		for len(pools) > 0 && pools[0].i <= k {
			e.pool = c.poolIDs[pools[0].v]
			pools = pools[1:]
		}
		end := c.n
		for _, m := range [...][]mark{stacks, used, pools} {
			if len(m) > 0 && m[0].i < end {
				end = m[0].i
			}
		}
		// Each event is a row, but for a synchronous free (ActFreeSync),
		// which is two: free_requested and free_completed, at one time. A
		// free that meets the end of the batch ends it with its
		// free_requested, and its free_completed starts the next (carry).
		b, k0 := e.cols.N, k
		e.grow(b + min(2*(end-k), e.batch-b))
		cols := &e.cols
		tus, kind, addr, size := cols.TimeUs, cols.Kind, cols.Addr, cols.Size
		stream, block := cols.Stream, cols.BlockSize
		j, carry := b, false
		for ; k < end && j < e.batch; k++ {
			ev := &c.ev[k]
			t := e.baseUs + times[k]/1000
			act := ev.Action()
			kd := liveKinds[act]
			if act == allocator.ActFreeSync {
				tus[j], kind[j], addr[j], size[j], stream[j], block[j] = t, trace.KindFreeRequested, ev.Addr, ev.Size, ev.Stream, ev.BlockSize()
				j++
				kd = trace.KindFreeCompleted
				if j == e.batch {
					carry = true
					break
				}
			}
			tus[j], kind[j], addr[j], size[j], stream[j], block[j] = t, kd, ev.Addr, ev.Size, ev.Stream, ev.BlockSize()
			j++
		}
		e.fillMarks(b, j)
		cols.N = j
		e.extra.Add(int64(j - b - (k - k0)))
		if cols.N < e.batch {
			continue
		}
		if !e.writeBatch() {
			return
		}
		if carry { // event k's free_completed, under event k's marks
			ev := &c.ev[k]
			cols.TimeUs[0], cols.Kind[0], cols.Addr[0], cols.Size[0], cols.Stream[0], cols.BlockSize[0] =
				e.baseUs+times[k]/1000, trace.KindFreeCompleted, ev.Addr, ev.Size, ev.Stream, ev.BlockSize()
			e.fillMarks(0, 1)
			cols.N = 1
			k++ // its first row counted as the extra one
		}
	}
}

// fillMarks sets the stack, pool and NVML columns of the batch's rows
// [from, to) to the values in force. The pool and NVML columns are zero but
// where a batch had other values (clear says which, and writeBatch zeroes
// them again).
func (e *encoder) fillMarks(from, to int) {
	cols := &e.cols
	fill(cols.Stack[from:to], e.stack)
	if e.pool != (allocator.PoolID{}) {
		fill(cols.PoolA[from:to], e.pool.A)
		fill(cols.PoolB[from:to], e.pool.B)
		e.clearPools = true
	}
	if e.used != 0 {
		fill(cols.DeviceUsed[from:to], e.used)
		e.clearUsed = true
	}
}

// liveKinds maps a chunk's actions to trace kinds.
var liveKinds = func() (k [256]trace.Kind) {
	for a := range k[:actSnapshot] {
		k[a] = replay.KindOf(allocator.Action(a))
	}
	k[actSnapshot] = trace.KindSnapshot
	return k
}()

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// grow makes the batch's columns hold n rows (they grow up to the batch
// size, so a short recording stays small).
func (e *encoder) grow(n int) {
	c := &e.cols
	if n <= len(c.TimeUs) {
		return
	}
	m := max(n, min(2*len(c.TimeUs), e.batch), 1024)
	c.TimeUs = append(c.TimeUs, make([]int64, m-len(c.TimeUs))...)
	c.Kind = append(c.Kind, make([]trace.Kind, m-len(c.Kind))...)
	c.Addr = append(c.Addr, make([]uint64, m-len(c.Addr))...)
	c.Size = append(c.Size, make([]int64, m-len(c.Size))...)
	c.Stream = append(c.Stream, make([]uint64, m-len(c.Stream))...)
	c.PoolA = append(c.PoolA, make([]uint64, m-len(c.PoolA))...)
	c.PoolB = append(c.PoolB, make([]uint64, m-len(c.PoolB))...)
	c.Stack = append(c.Stack, make([]trace.StackID, m-len(c.Stack))...)
	c.BlockSize = append(c.BlockSize, make([]int64, m-len(c.BlockSize))...)
	c.DeviceUsed = append(c.DeviceUsed, make([]int64, m-len(c.DeviceUsed))...)
}

// writeBatch writes the batch, if it holds events. It reports whether
// writing succeeded.
func (e *encoder) writeBatch() bool {
	if e.cols.N == 0 {
		return true
	}
	c := &e.cols
	err := e.w.WriteColumns(c)
	if e.clearPools {
		clear(c.PoolA[:c.N])
		clear(c.PoolB[:c.N])
		e.clearPools = false
	}
	if e.clearUsed {
		clear(c.DeviceUsed[:c.N])
		e.clearUsed = false
	}
	c.N = 0
	if err != nil {
		e.fail(err)
		return false
	}
	e.lastWrite = time.Since(e.t0)
	return true
}

// stampTimes fills times (one per event of a chunk) from the chunk's clock
// reads, the previous read (e.lastT) and, past the last event, end (when
// not 0). An event between reads i and j happened between them; it is
// placed at t_i + (k-i)·rate, where rate is the smaller of the window's own
// mean (t_j-t_i)/(j-i) and the previous window's. So events spread evenly
// when the allocator runs at a steady pace, and stay early in a window that
// ends in a device call (segment events always read the clock, after the
// call), where the time went. The error is at most the window's length,
// about clockPeriod.
func (e *encoder) stampTimes(times []int64, reads []mark, end int64) {
	prev := -1 // index of the last timed event; -1 is e.lastT
	window := func(j int, tj int64) {
		n := j - prev
		rate := float64(tj-e.lastT) / float64(n)
		r := rate
		if e.lastRate >= 0 && e.lastRate < r {
			r = e.lastRate
		}
		for k := prev + 1; k < j; k++ {
			times[k] = e.lastT + int64(float64(k-prev)*r)
		}
		if n > 1 || e.lastRate < 0 {
			e.lastRate = rate
		}
	}
	for _, m := range reads {
		window(m.i, m.v)
		times[m.i] = m.v
		e.lastT, prev = m.v, m.i
	}
	if prev < len(times)-1 {
		if end > 0 {
			window(len(times), end)
		} else { // no end given: not expected
			for k := prev + 1; k < len(times); k++ {
				times[k] = e.lastT
			}
		}
	}
}
