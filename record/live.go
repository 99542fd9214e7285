package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
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
	Out   string            // the trace to write (through a partial file beside it: crash-safe)
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
// The trace grows in a partial file beside opts.Out, renamed to it at the
// end (trace.WriterOptions.Live), and is flushed in bounded batches, so a
// recording killed mid-run leaves that partial file, readable up to its
// last batch (trace.Reader.Truncated reports the cut). When a statement fails (an
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
	// Live, so that a killed recording leaves its flushed batches; the
	// recorder decides when to flush (by size and by age).
	tw, err := trace.Create(opts.Out, recordMeta(&opts, a), trace.WriterOptions{Live: true, BatchRows: math.MaxInt32})
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
	a.SetEventSink(r, r.buffer())
	start := time.Now()
	runErr := x.run()
	a.SetEventSink(nil, nil) // hands r the last events
	if benchPhase != nil {
		benchPhase("run", r)
	}
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
	if benchPhase != nil {
		benchPhase("close", r)
	}
	return res, runErr
}

// benchPhase, set by benchmarks only, is called on recordTo's goroutine as
// the workload's last event is recorded ("run") and once the trace is closed
// ("close"), to tell the allocator's time from the recording's tail.
var benchPhase func(phase string, r *recorder)

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

// recorder is the allocator's EventSink during a live recording: the
// allocator writes each event into the current chunk itself, and every so
// many events (and at every segment and oom event, and pool change) hands
// the run to the recorder, which reads the clock and NVML's latest reading;
// the statement's stack and the pool are noted when they change. The
// encoder goroutine does the rest (live_ring.go).
type recorder struct {
	// The hot path's: the current chunk's events, the index of the next
	// event, the index past the next one to stamp (read the clock at), the
	// pool last noted and the encoder's request to hand the chunk over now.
	ev       []allocator.RawEvent
	i        int
	stop     int
	pool     allocator.PoolID
	flushReq atomic.Bool

	a      *allocator.Allocator
	enc    *encoder
	t0     time.Time
	used   latestReading   // NVML's latest reading; nil on the simulated device
	stacks []trace.StackID // per statement id

	cur   *chunk
	stack trace.StackID // of the statement running now
	every int           // events between clock reads (pace)
	// lastReadAt and lastRead are the event (counted from the start) and
	// time (ns since t0) of the last clock read.
	lastReadAt, lastRead int64
	lastUsed             int64 // the NVML reading last noted
	previous             int64 // events in the chunks handed over
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
	r := &recorder{a: a, t0: t0, stack: trace.NoStack, every: 1, lastReadAt: -1}
	r.enc = newEncoder(w, t0, ordinal, min(batch, trace.DefaultBatchRows), flushEvery, &r.flushReq)
	r.cur = r.enc.chunk()
	r.ev = r.cur.ev
	r.stop = 1 // the first event is stamped: a clock read and NVML's reading
	return r
}

func (r *recorder) setStmt(s *stmt) {
	if id := r.stacks[s.id]; id != r.stack {
		r.stack = id
		c := r.cur
		c.stacks = append(c.stacks, mark{r.i + r.a.PendingEvents(), int64(id)})
	}
}

// events reports how many events were recorded so far. The synchronous
// frees the encoder has yet to take (ActFreeSync: two events in one) count
// once, so while the recording runs this may be short by up to one event in
// three of the lead the encoder leaves (ringChunks chunks at most); it is
// exact once finish returns.
func (r *recorder) events() int64 {
	return r.previous + int64(r.i+r.a.PendingEvents()) + r.enc.extra.Load()
}

// EventsWritten implements allocator.EventSink, and is the recorder's part
// of the hot path: the allocator wrote n events into the chunk from r.i on,
// all in pool, because the buffer it was given (up to the next clock read)
// is full, or a segment or oom event came (they follow device calls, which
// take microseconds: their own clock read keeps the events before them
// early), or the pool changed. It reads the clock and returns the buffer
// up to the next read.
func (r *recorder) EventsWritten(n int, pool allocator.PoolID) []allocator.RawEvent {
	first := r.i
	r.i += n
	if n > 0 {
		r.stamp(first, r.i-1, pool)
	}
	return r.buffer()
}

// stamp reads the clock for event last, the last of the chunk so far, notes
// the pool of the events from first on if it changed, and NVML's latest
// reading (which holds from event last on: it is taken every few
// milliseconds, so noting it up to maxClockEvery events late, within about
// clockPeriod, loses nothing), and hands the chunk to the encoder when it is
// full or a flush is due.
func (r *recorder) stamp(first, last int, pool allocator.PoolID) {
	c := r.cur
	now := int64(time.Since(r.t0))
	c.times = append(c.times, mark{last, now})
	r.pace(r.previous+int64(last), now)
	if pool != r.pool {
		r.pool = pool
		c.pools = append(c.pools, mark{first, int64(len(c.poolIDs))})
		c.poolIDs = append(c.poolIDs, pool)
	}
	if r.used != nil {
		if v := r.used.Latest(); v != r.lastUsed {
			r.lastUsed = v
			c.used = append(c.used, mark{last, v})
		}
	}
	n := last + 1
	flush := r.flushReq.Load()
	if n < len(r.ev) && !flush {
		r.stop = min(n+r.every, len(r.ev))
		return
	}
	if flush {
		r.flushReq.Store(false)
		c.flush = true
	}
	r.handOver(n)
}

// pace sets how many events go before the next clock read from the pace of
// those since the last one, event k read at now (ns), so that reads fall
// about clockPeriod apart.
func (r *recorder) pace(k, now int64) {
	n, dt := k-r.lastReadAt, now-r.lastRead
	r.lastReadAt, r.lastRead = k, now
	every := maxClockEvery
	if dt > 0 && n*int64(clockPeriod) < int64(maxClockEvery)*dt {
		every = max(int(n*int64(clockPeriod)/dt), 1)
	}
	r.every = every
}

// handOver hands the current chunk, of n events, to the encoder and takes
// an empty one.
func (r *recorder) handOver(n int) {
	c := r.cur
	c.n = n
	r.previous += int64(n) // before the encoder owns c
	r.enc.full <- c
	r.cur = r.enc.chunk()
	r.ev, r.i = r.cur.ev, 0
	r.stop = min(r.every, len(r.ev))
}

// snapshot records a snapshot marker, as torch.cuda.memory_snapshot() leaves
// in PyTorch's history: Size is the bytes of active blocks. The allocator's
// events before it are taken first, and its next ones go after it.
func (r *recorder) snapshot() error {
	r.a.FlushEvents()
	i := r.i
	r.ev[i] = allocator.RawEvent{Size: r.a.Stats().ActiveBytes[0].Current, BlockAction: allocator.PackBlockAction(0, actSnapshot)}
	r.i = i + 1
	r.stamp(i, i, allocator.PoolID{})
	r.a.SetEventBuffer(r.buffer())
	return r.enc.failed()
}

// buffer is where the allocator writes its next events: the chunk up to the
// next clock read.
func (r *recorder) buffer() []allocator.RawEvent { return r.ev[r.i:r.stop] }

// finish hands the last events to the encoder and waits until it has
// written them all; the writer is then the caller's again. The allocator
// must have handed over its events (SetEventSink(nil, nil)).
func (r *recorder) finish() {
	c := r.cur
	c.n = r.i
	c.end = int64(time.Since(r.t0))
	c.flush = true
	r.previous += int64(c.n) // before the encoder owns c
	r.enc.full <- c
	r.cur, r.ev, r.i = nil, nil, 0
	close(r.enc.full)
	r.enc.kick() // a polling encoder sees the close now
	r.enc.wait()
}
