package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/cuda"
	"github.com/tracer-dev/tracer/trace"
)

// DefaultFlushEvery bounds how much a killed recording can lose in time: a
// batch is flushed (and synced) when it reaches the writer's batch size or
// when this long has passed since the last flush, whichever comes first.
const DefaultFlushEvery = time.Second

// Options configure Record.
type Options struct {
	Workload *Workload
	Target   *Target        // where memory comes from (OpenTarget)
	Conf     allocator.Conf // allocator settings (zero: DefaultConf); Conf.Raw is recorded as the trace's AllocConf
	// Limit caps the bytes the allocator may reserve, as
	// torch.cuda.set_per_process_memory_fraction does; 0 keeps the one of
	// Conf (per_process_memory_fraction), if any.
	Limit int64
	Out   string            // the trace to write (in place: crash-safe)
	Extra map[string]string // more Meta.Extra annotations

	// BatchRows is the largest number of events per flushed batch
	// (trace.DefaultBatchRows when 0, and at most that: it sizes the
	// recorder's buffers); FlushEvery the longest time between
	// flushes (DefaultFlushEvery when 0). SampleEvery is the NVML sampling
	// period on a GPU (DefaultSampleEvery when 0).
	BatchRows   int
	FlushEvery  time.Duration
	SampleEvery time.Duration

	// Progress, when non-nil, receives a status line (ending in '\r') a few
	// times a second during long runs, and a clearing line at the end.
	Progress io.Writer
}

// Result describes a finished (or stopped) live recording.
type Result struct {
	Out      string
	Workload string
	Device   string // DeviceCUDA or DeviceSim
	Events   int64
	Stats    allocator.Stats // the allocator's counters at the end; peaks over the run
	Elapsed  time.Duration
	// Samples is the number of NVML readings taken (0 on the simulated
	// device); SampleErr the error that stopped sampling early, if any.
	Samples   int64
	SampleErr error
}

// Record runs a workload live on the caching allocator and records every
// event it emits, with the real address (the GPU's, on a CUDA target), the
// time (µs since the Unix epoch, monotonic within the run) and, on a GPU,
// NVML's latest reading of the device's used memory.
//
// The trace is written in place and flushed in bounded batches, so a
// recording killed mid-run leaves a trace readable up to its last batch
// (trace.Reader.Truncated reports the cut). When a statement fails (an
// out-of-memory most often: its oom event is the trace's last) or ctx is
// cancelled, the trace is closed normally and Record returns the Result with
// the error (a *StatementError for a statement).
func Record(ctx context.Context, opts Options) (*Result, error) {
	if opts.Workload == nil || opts.Target == nil {
		return nil, errors.New("record: Options need a Workload and a Target")
	}
	if opts.Conf == (allocator.Conf{}) {
		opts.Conf = allocator.DefaultConf()
	}
	a, err := allocator.New(opts.Conf, opts.Target.Dev)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if opts.Limit > 0 {
		a.SetMemoryLimit(opts.Limit)
	}
	// In place, so that a killed recording leaves its flushed batches; the
	// recorder decides when to flush (by size and by age).
	tw, err := trace.Create(opts.Out, recordMeta(&opts, a), trace.WriterOptions{InPlace: true, BatchRows: math.MaxInt32})
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return recordTo(ctx, &opts, a, tw)
}

// recordTo runs the workload on a, writing to tw, which it closes (or
// aborts, when writing failed).
func recordTo(ctx context.Context, opts *Options, a *allocator.Allocator, tw *trace.Writer) (*Result, error) {
	w := opts.Workload
	stacks := make([]trace.StackID, w.nstmt)
	for _, s := range w.statements() {
		stacks[s.id] = tw.AddStack(s.stack(w))
	}
	r := newRecorder(tw, a, opts.Target.Ordinal, opts.BatchRows, opts.FlushEvery)
	r.stacks = stacks
	var (
		smp    *cuda.MemorySampler
		smpErr error
	)
	if opts.Target.Kind == DeviceCUDA && opts.Target.nvmlIndex >= 0 {
		every := opts.SampleEvery
		if every <= 0 {
			every = DefaultSampleEvery
		}
		if smp, smpErr = cuda.StartMemorySampler(opts.Target.nvmlIndex, every); smpErr == nil {
			r.used = smp
		}
	}

	x := newExecutor(ctx, w, a)
	x.setStmt = r.setStmt
	x.snapshot = r.snapshot
	prog := &progress{out: opts.Progress, name: w.Name, every: 250 * time.Millisecond}
	x.tick = func(s *stmt) error {
		if err := r.enc.failed(); err != nil {
			return err
		}
		prog.update(s.pos(w), r.events(), a)
		return nil
	}
	a.SetObserver(r)
	start := time.Now()
	runErr := x.run()
	a.SetObserver(nil)
	r.finish()
	prog.done()

	res := &Result{Out: opts.Out, Workload: w.Name, Device: opts.Target.Kind, Stats: a.Stats(), Elapsed: time.Since(start)}
	res.SampleErr = smpErr
	if smp != nil {
		res.SampleErr = smp.Stop()
		res.Samples = smp.Samples()
	}
	if err := r.enc.failed(); err != nil { // the writer failed: that is the error to report
		tw.Abort()
		return nil, fmt.Errorf("record %s: %w", opts.Out, err)
	}
	res.Events = tw.Events()
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("record %s: %w", opts.Out, err)
	}
	return res, runErr
}

func recordMeta(opts *Options, a *allocator.Allocator) trace.Meta {
	m := trace.Meta{
		Producer:    "tracer " + Version,
		Source:      trace.SourceRecord,
		AllocConf:   opts.Conf.Raw,
		DeviceName:  opts.Target.Name,
		DeviceTotal: opts.Target.Total,
		MemoryLimit: a.MemoryLimit(),
		Extra: map[string]string{
			"workload":      opts.Workload.Name,
			"workload_file": opts.Workload.File,
			"workload_text": string(opts.Workload.Source),
			"device":        opts.Target.Kind,
		},
	}
	if opts.Conf.MemoryFraction < 1 && opts.Limit == 0 {
		m.MemoryFraction = opts.Conf.MemoryFraction
	}
	for k, v := range opts.Extra {
		m.Extra[k] = v
	}
	return m
}

// latestReading is what the recorder needs of a memory sampler
// (cuda.MemorySampler): its latest reading, cheap enough for every event.
type latestReading interface{ Latest() int64 }

// recorder is the allocator's Observer during a live recording. Its hot
// path copies each event into the current chunk and reads the clock every
// clockEvery events (and at every segment and oom event); the statement's
// stack and NVML's reading are noted when they change. The encoder
// goroutine does the rest (live_ring.go).
type recorder struct {
	a      *allocator.Allocator
	enc    *encoder
	t0     time.Time
	used   latestReading   // NVML's latest reading; nil on the simulated device
	stacks []trace.StackID // per statement id

	cur      *chunk
	left     int              // events before the next clock read
	stack    trace.StackID    // of the statement running now
	lastUsed int64            // the NVML reading last noted
	pool     allocator.PoolID // the pool last noted
	previous int64            // events in the chunks handed over
}

// newRecorder starts a recording into w: batches of at most batch events
// (trace.DefaultBatchRows when 0), written at least every flushEvery
// (DefaultFlushEvery when 0).
func newRecorder(w *trace.Writer, a *allocator.Allocator, ordinal int32, batch int, flushEvery time.Duration) *recorder {
	if batch <= 0 {
		batch = trace.DefaultBatchRows
	}
	if flushEvery <= 0 {
		flushEvery = DefaultFlushEvery
	}
	// Wall-clock base plus monotonic elapsed time: comparable with PyTorch's
	// epoch timestamps, yet never running backwards within the run.
	t0 := time.Now()
	r := &recorder{a: a, t0: t0, stack: trace.NoStack, left: clockEvery}
	r.enc = newEncoder(w, t0, ordinal, min(batch, trace.DefaultBatchRows), flushEvery)
	r.cur = r.enc.chunk()
	return r
}

func (r *recorder) setStmt(s *stmt) {
	if id := r.stacks[s.id]; id != r.stack {
		r.stack = id
		c := r.cur
		c.stacks = append(c.stacks, mark{c.n, int64(id)})
	}
}

// events reports how many events were recorded so far.
func (r *recorder) events() int64 { return r.previous + int64(r.cur.n) }

// AllocatorEvent implements allocator.Observer. It is the hot path: five
// stores, and a clock read every clockEvery events; the rest is out of line.
func (r *recorder) AllocatorEvent(e *allocator.Event) {
	c := r.cur
	i := c.n
	p := &c.ev[i]
	p.addr, p.size, p.stream, p.block, p.act = e.Addr, e.Size, e.Stream, e.BlockSize, e.Action
	c.n = i + 1
	if e.Pool != r.pool || r.used != nil {
		r.note(c, i, e.Pool)
	}
	r.left--
	// Segment and oom events follow device calls, which take microseconds
	// on a GPU: their own clock read keeps the events before them early.
	if r.left == 0 || e.Action >= allocator.ActSegmentAlloc || r.enc.flushReq.Load() {
		r.stamp(c, i)
	}
}

// note notes a change of pool or NVML reading at event i of c.
//
//go:noinline
func (r *recorder) note(c *chunk, i int, pool allocator.PoolID) {
	if pool != r.pool {
		r.pool = pool
		c.pools = append(c.pools, mark{i, int64(len(c.poolIDs))})
		c.poolIDs = append(c.poolIDs, pool)
	}
	if r.used != nil {
		if v := r.used.Latest(); v != r.lastUsed {
			r.lastUsed = v
			c.used = append(c.used, mark{i, v})
		}
	}
}

// stamp reads the clock for event i, the last of c, and hands c to the
// encoder when it is full or a flush is due.
//
//go:noinline
func (r *recorder) stamp(c *chunk, i int) {
	c.times = append(c.times, mark{i, int64(time.Since(r.t0))})
	room := len(c.ev) - c.n
	r.left = min(clockEvery, room)
	flush := r.enc.flushReq.Load()
	if room > 0 && !flush {
		return
	}
	if flush {
		r.enc.flushReq.Store(false)
		c.flush = true
	}
	r.previous += int64(c.n) // before the encoder owns c
	r.enc.full <- c
	r.cur = r.enc.chunk()
	r.left = clockEvery
}

// snapshot records a snapshot marker, as torch.cuda.memory_snapshot() leaves
// in PyTorch's history: Size is the bytes of active blocks.
func (r *recorder) snapshot() error {
	c := r.cur
	i := c.n
	c.ev[i] = liveEvent{act: actSnapshot, size: r.a.Stats().ActiveBytes[0].Current}
	c.n = i + 1
	r.note(c, i, allocator.PoolID{})
	r.stamp(c, i)
	return r.enc.failed()
}

// finish hands the last events to the encoder and waits until it has
// written them all; the writer is then the caller's again.
func (r *recorder) finish() {
	c := r.cur
	c.end = int64(time.Since(r.t0))
	c.flush = true
	r.previous += int64(c.n) // before the encoder owns c
	r.enc.full <- c
	r.cur = nil
	close(r.enc.full)
	r.enc.wait()
}
