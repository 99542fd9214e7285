package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/tracer-dev/tracer/allocator"
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
	// (trace.DefaultBatchRows when 0); FlushEvery the longest time between
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
	r := newRecorder(tw, a, opts.Target.Ordinal, opts.BatchRows, opts.FlushEvery)
	r.stacks = make([]trace.StackID, w.nstmt)
	for _, s := range w.statements() {
		r.stacks[s.id] = tw.AddStack(s.stack(w))
	}
	var smp *sampler
	if opts.Target.Kind == DeviceCUDA && opts.Target.nvmlIndex >= 0 {
		every := opts.SampleEvery
		if every <= 0 {
			every = DefaultSampleEvery
		}
		smp = startSampler(nvmlUsed(opts.Target.nvmlIndex), every)
		r.used = &smp.used
	}

	x := newExecutor(ctx, w, a)
	x.setStmt = r.setStmt
	x.snapshot = r.snapshot
	prog := &progress{out: opts.Progress, name: w.Name, every: 250 * time.Millisecond}
	x.tick = func(s *stmt) error {
		if r.err != nil {
			return r.err
		}
		prog.update(s.pos(w), tw.Events(), a)
		return nil
	}
	a.SetObserver(r)
	start := time.Now()
	runErr := x.run()
	a.SetObserver(nil)
	prog.done()

	res := &Result{Out: opts.Out, Workload: w.Name, Device: opts.Target.Kind, Stats: a.Stats(), Elapsed: time.Since(start)}
	if smp != nil {
		res.SampleErr = smp.Stop()
		res.Samples = smp.n.Load()
	}
	if r.err != nil { // the writer failed: that is the error to report
		tw.Abort()
		return nil, fmt.Errorf("record %s: %w", opts.Out, r.err)
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

// kinds maps the allocator's actions to trace kinds (the same names).
var kinds = [...]trace.Kind{
	allocator.ActAlloc:         trace.KindAlloc,
	allocator.ActFreeRequested: trace.KindFreeRequested,
	allocator.ActFreeCompleted: trace.KindFreeCompleted,
	allocator.ActSegmentAlloc:  trace.KindSegmentAlloc,
	allocator.ActSegmentFree:   trace.KindSegmentFree,
	allocator.ActSegmentMap:    trace.KindSegmentMap,
	allocator.ActSegmentUnmap:  trace.KindSegmentUnmap,
	allocator.ActOOM:           trace.KindOOM,
}

// recorder is the allocator's Observer during a live recording: it stamps
// each event with the time, the current statement's stack and the latest
// NVML sample, writes it, and flushes by size or age.
type recorder struct {
	w       *trace.Writer
	a       *allocator.Allocator
	t0      time.Time
	baseUs  int64 // t0 as µs since the Unix epoch
	ordinal int32
	used    interface{ Load() int64 } // latest NVML sample; nil on the simulated device
	stacks  []trace.StackID           // per statement id
	stack   trace.StackID             // of the statement running now

	batch      int           // events per batch
	rows       int           // events since the last flush
	flushEvery time.Duration // longest time between flushes
	lastFlush  time.Duration // since t0
	ev         trace.Event
	err        error // first write error; stops the run
}

func newRecorder(w *trace.Writer, a *allocator.Allocator, ordinal int32, batch int, flushEvery time.Duration) *recorder {
	if batch <= 0 {
		batch = trace.DefaultBatchRows
	}
	if flushEvery <= 0 {
		flushEvery = DefaultFlushEvery
	}
	t0 := time.Now()
	return &recorder{w: w, a: a, t0: t0, baseUs: t0.UnixMicro(), ordinal: ordinal,
		stack: trace.NoStack, batch: batch, flushEvery: flushEvery}
}

func (r *recorder) setStmt(s *stmt) { r.stack = r.stacks[s.id] }

// AllocatorEvent implements allocator.Observer.
func (r *recorder) AllocatorEvent(e *allocator.Event) {
	if r.err != nil {
		return
	}
	// Wall-clock base plus monotonic elapsed time: comparable with PyTorch's
	// epoch timestamps, yet never running backwards within the run.
	now := time.Since(r.t0)
	r.ev = trace.Event{
		TimeUs:    r.baseUs + now.Microseconds(),
		Device:    r.ordinal,
		Kind:      kinds[e.Action],
		Addr:      e.Addr,
		Size:      e.Size,
		Stream:    e.Stream,
		Pool:      trace.PoolID(e.Pool),
		Stack:     r.stack,
		BlockSize: e.BlockSize,
	}
	if r.used != nil {
		r.ev.DeviceUsed = r.used.Load()
	}
	r.write(now)
}

// write writes r.ev and flushes the batch when it is full or has aged past
// flushEvery, so a killed recording loses at most one batch, and at most a
// second of events even when they trickle. The recorder, not the writer,
// decides when to flush (the writer's own batch limit is set out of reach).
func (r *recorder) write(now time.Duration) {
	if err := r.w.Write(&r.ev); err != nil {
		r.err = err
		return
	}
	r.rows++
	if r.rows >= r.batch || now-r.lastFlush >= r.flushEvery {
		if err := r.w.Flush(); err != nil {
			r.err = err
			return
		}
		r.rows, r.lastFlush = 0, now
	}
}

// snapshot writes a snapshot marker, as torch.cuda.memory_snapshot() leaves
// in PyTorch's history: Size is the bytes of active blocks.
func (r *recorder) snapshot() error {
	st := r.a.Stats()
	r.ev = trace.Event{
		TimeUs: r.baseUs + time.Since(r.t0).Microseconds(),
		Device: r.ordinal,
		Kind:   trace.KindSnapshot,
		Size:   st.ActiveBytes[0].Current,
		Stack:  r.stack,
	}
	if r.used != nil {
		r.ev.DeviceUsed = r.used.Load()
	}
	r.write(time.Since(r.t0))
	return r.err
}
