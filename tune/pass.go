package tune

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// A pass reads the trace once and replays it under several settings at
// once: the decoder hands each batch of events to every replay, each on its
// own goroutine, and takes the batch back when the last replay is done with
// it. The trace is decoded once per pass, not once per setting, and memory
// is bounded by the allocator states of the replays (their live blocks and
// segments) and a few batches, never by the trace's length.
const (
	passRows     = 8192 // events per batch: the hand-off vanishes against the replays' work on them
	passInFlight = 4    // batches a replay may have queued before the decoder waits for it
	// maxPerPass bounds the replays of one pass, and so the allocator
	// states held at once; more settings take more passes.
	maxPerPass = 64
)

// maxOOMSeqs bounds the failed requests an Outcome names.
const maxOOMSeqs = 16

// job is one replay of a pass.
type job struct {
	set pipeline.Resolved
}

// DeviceOutcome is one device's counters at the end of a replay.
type DeviceOutcome struct {
	Device int32
	Stats  allocator.Stats
}

// Outcome is what one replay of the trace under a setting did.
type Outcome struct {
	// PeakReservedBytes and PeakAllocatedBytes are the largest of the
	// devices' reserved_bytes.all.peak and allocated_bytes.all.peak: the
	// memory the run needs on its fullest GPU.
	PeakReservedBytes  int64
	PeakAllocatedBytes int64
	OOMs               int64 // num_ooms, over the devices
	DeviceMallocs      int64 // num_device_alloc (cudaMalloc, or pages mapped)
	DeviceFrees        int64 // num_device_free
	Retries            int64 // num_alloc_retries: releases of the cache to retry a malloc
	// OOMSeqs are the trace positions of the first failed requests.
	OOMSeqs []int64
	Devices []DeviceOutcome
}

// DeviceCalls counts the driver calls that change the reservation, each a
// slow, synchronizing call.
func (o *Outcome) DeviceCalls() int64 { return o.DeviceMallocs + o.DeviceFrees }

// sameAs reports whether two replays did the same on every device: every
// memory_stats() counter equal, but for those that echo max_split_size_mb
// (max_split_size, and the oversize counts of blocks above it), which
// differ with the setting even where the allocator's work does not.
func (o *Outcome) sameAs(p *Outcome) bool {
	if len(o.Devices) != len(p.Devices) {
		return false
	}
	for i := range o.Devices {
		a, b := o.Devices[i], p.Devices[i]
		for _, d := range []*DeviceOutcome{&a, &b} {
			d.Stats.MaxSplitSize = 0
			d.Stats.OversizeAllocations, d.Stats.OversizeSegments = allocator.Stat{}, allocator.Stat{}
		}
		if a != b {
			return false
		}
	}
	return true
}

// failsAt reports whether the replay failed the request at seq.
func (o *Outcome) failsAt(seq int64) bool {
	for _, s := range o.OOMSeqs {
		if s == seq {
			return true
		}
	}
	return false
}

func outcomeOf(res *replay.Result) Outcome {
	var o Outcome
	for _, d := range res.Devices {
		st := d.Stats
		o.PeakReservedBytes = max(o.PeakReservedBytes, st.ReservedBytes[0].Peak)
		o.PeakAllocatedBytes = max(o.PeakAllocatedBytes, st.AllocatedBytes[0].Peak)
		o.OOMs += st.NumOOMs
		o.DeviceMallocs += st.NumDeviceAlloc
		o.DeviceFrees += st.NumDeviceFree
		o.Retries += st.NumAllocRetries
		for _, f := range d.OOMs {
			if len(o.OOMSeqs) < maxOOMSeqs {
				o.OOMSeqs = append(o.OOMSeqs, f.Seq)
			}
		}
		o.Devices = append(o.Devices, DeviceOutcome{Device: d.Device, Stats: st})
	}
	return o
}

// evaluator runs passes over one input, keeping a Replayer per replay slot
// so that later passes reuse the memory of earlier ones.
type evaluator struct {
	in        *pipeline.Input
	replayers []*replay.Replayer
	replays   int // replays run so far
	passes    int
	warned    bool // about a trace cut short
	// progress, when set, hears how far a long pass got.
	progress func(msg string)
}

// run replays the input under every job and returns their outcomes in order,
// in passes of at most maxPerPass replays.
func (e *evaluator) run(ctx context.Context, jobs []job) ([]Outcome, error) {
	out := make([]Outcome, 0, len(jobs))
	for len(jobs) > 0 {
		n := min(len(jobs), maxPerPass)
		got, err := e.pass(ctx, jobs[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		jobs = jobs[n:]
	}
	return out, nil
}

// pass replays the input once under each job, all at once, reading it once.
func (e *evaluator) pass(ctx context.Context, jobs []job) ([]Outcome, error) {
	for _, j := range jobs {
		if err := j.set.Conf.Modelled(); err != nil {
			return nil, fmt.Errorf("%s: %v", e.in.Name, err)
		}
	}
	rd, err := e.in.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	for len(e.replayers) < len(jobs) {
		e.replayers = append(e.replayers, new(replay.Replayer))
	}
	blocks := e.in.BlocksGuess()

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := newBroadcast(len(jobs))
	outs := make([]Outcome, len(jobs))
	var (
		mu       sync.Mutex
		firstErr error // the first replay's error; the others' follow from it
	)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := b.consumers[i]
			defer src.drain()
			rp := e.replayers[i]
			opts := replay.Options{
				Conf:             j.set.Conf,
				TotalMemory:      j.set.Total,
				MemoryLimit:      j.set.Limit,
				Recorded:         j.set.Recorded,
				SkipCompare:      true,
				EmptyCacheRows:   e.in.Meta.EmptyCacheRows,
				InferEmptyCaches: j.set.InferEmptyCaches,
				Blocks:           blocks,
			}
			// The model's arena made once for the file's guess, outside
			// the heap: not doubled (each doubling copies every block),
			// and a guess above the trace costs address space only. A
			// setting the model refuses is Run's error to report.
			if blocks > 0 && rp.PrepareOffHeap(opts) == nil {
				defer rp.Release()
			}
			res, err := rp.Run(ctx, src, opts, nil)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: %s: %w", e.in.Name, j.set.Label, err)
				}
				mu.Unlock()
				cancel() // the other replays of the pass are of no use now
				return
			}
			outs[i] = outcomeOf(res)
		}()
	}
	readErr := b.feed(ctx, rd, func(events int64) {
		if e.progress != nil {
			e.progress(fmt.Sprintf("%d replays at once, at event %s", len(jobs), analysis.Count(events)))
		}
	})
	wg.Wait()
	if readErr == nil && rd.Truncated() && e.in.Warn != nil && !e.warned {
		// As the other commands say it: the figures cover the whole
		// batches only.
		e.warned = true
		e.in.Warn(fmt.Sprintf("%s ends without its end-of-stream marker (a killed recording?): tuning on the events of its whole batches", e.in.Name))
	}
	switch {
	case parent.Err() != nil:
		return nil, parent.Err()
	case readErr != nil && !errors.Is(readErr, context.Canceled):
		return nil, readErr // the replays' errors follow from it
	case firstErr != nil:
		return nil, firstErr
	}
	e.replays += len(jobs)
	e.passes++
	return outs, nil
}

// sharedBatch is a batch of events that every consumer of a pass reads; the
// last to be done with it returns it to the pool.
type sharedBatch struct {
	evs  []trace.Event
	refs atomic.Int32
}

// broadcast hands the batches of one decoder to several consumers.
type broadcast struct {
	consumers []*consumer
	pool      chan *sharedBatch
	err       error // the reader's, set before the consumers' channels close
}

func newBroadcast(n int) *broadcast {
	b := &broadcast{pool: make(chan *sharedBatch, passInFlight+2)}
	for range n {
		b.consumers = append(b.consumers, &consumer{b: b, ch: make(chan *sharedBatch, passInFlight)})
	}
	return b
}

func (b *broadcast) get() *sharedBatch {
	select {
	case s := <-b.pool:
		s.evs = s.evs[:0]
		return s
	default:
		return &sharedBatch{evs: make([]trace.Event, 0, passRows)}
	}
}

func (b *broadcast) release(s *sharedBatch) {
	if s.refs.Add(-1) == 0 {
		select {
		case b.pool <- s:
		default:
		}
	}
}

// tickEvery is how often a long pass reports how far it got.
const tickEvery = 2 * time.Second

// feed decodes rd and sends every batch to every consumer, then closes
// their channels, calling tick with the events sent so far every
// tickEvery. It returns the reader's error, or the context's when it
// stopped early.
func (b *broadcast) feed(ctx context.Context, rd *trace.Reader, tick func(events int64)) (err error) {
	defer func() {
		b.err = err
		for _, c := range b.consumers {
			close(c.ch)
		}
	}()
	s := b.get()
	var sent int64
	last := time.Now()
	send := func() error {
		s.refs.Store(int32(len(b.consumers)))
		for _, c := range b.consumers {
			select {
			case c.ch <- s:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		sent += int64(len(s.evs))
		if time.Since(last) >= tickEvery {
			last = time.Now()
			tick(sent)
		}
		s = b.get()
		return nil
	}
	for rd.Next() {
		s.evs = append(s.evs, *rd.Event())
		if len(s.evs) == passRows {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if len(s.evs) > 0 {
		if err := send(); err != nil {
			return err
		}
	}
	return rd.Err()
}

// consumer is one replay's view of a pass: a replay.BatchSource.
type consumer struct {
	b   *broadcast
	ch  chan *sharedBatch
	cur *sharedBatch
	i   int
}

// NextBatch returns the next batch, read-only, valid until the next call.
func (c *consumer) NextBatch() []trace.Event {
	if c.cur != nil {
		if c.i < len(c.cur.evs) { // what Next left of the batch
			evs := c.cur.evs[c.i:]
			c.i = len(c.cur.evs)
			return evs
		}
		c.b.release(c.cur)
		c.cur = nil
	}
	s, ok := <-c.ch
	if !ok {
		return nil
	}
	c.cur, c.i = s, len(s.evs)
	return s.evs
}

// Next advances to the next event (for a caller that does not take batches).
func (c *consumer) Next() bool {
	for c.cur == nil || c.i >= len(c.cur.evs) {
		if c.cur != nil {
			c.b.release(c.cur)
			c.cur = nil
		}
		s, ok := <-c.ch
		if !ok {
			return false
		}
		c.cur, c.i = s, 0
	}
	c.i++
	return true
}

// Event returns the current event.
func (c *consumer) Event() *trace.Event { return &c.cur.evs[c.i-1] }

// Err returns the reader's error once the batches have ended.
func (c *consumer) Err() error { return c.b.err }

// drain releases every batch the consumer has not read: a replay that ended
// early (an error) must not hold up the decoder.
func (c *consumer) drain() {
	if c.cur != nil {
		c.b.release(c.cur)
		c.cur = nil
	}
	for s := range c.ch {
		c.b.release(s)
	}
}
