package view

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/trace"
)

// Options say what to view.
type Options struct {
	// Paths are the traces, drawn together; none views the built-in sample.
	Paths []string
	// Replays are settings to replay the first trace under, each drawn
	// over it, named by its settings in the legend.
	Replays []pipeline.Settings
	// Time puts time on the x axis (µs since each trace's first timed
	// event, so the replays and the ranks of one run line up) when every
	// trace is timed; the default is the event index, as in PyTorch's
	// memory viewer, which a long pause (start-up, data loading) does not
	// squeeze.
	Time bool
	// Warn receives warnings about the inputs (a cut trace, events of other
	// devices left out).
	Warn func(msg string)
}

// View is the traces shown together. X, on the timeline, is the event
// index, or time (see Options.Time) when TimeAxis.
type View struct {
	Traces   []*Trace
	TimeAxis bool
}

// Load reads every trace and replay of opt into memory and indexes it.
func Load(ctx context.Context, opt Options) (*View, error) {
	paths := opt.Paths
	if len(paths) == 0 {
		paths = []string{""}
	}
	v := &View{}
	var first *pipeline.Input
	for _, p := range paths {
		in, err := pipeline.Open(p)
		if err != nil {
			return nil, err
		}
		in.Warn = opt.Warn
		if first == nil {
			first = in
		}
		t, err := loadRecorded(ctx, in, opt.Warn)
		if err != nil {
			return nil, err
		}
		v.Traces = append(v.Traces, t)
	}
	for _, s := range opt.Replays {
		t, err := loadReplay(ctx, first, s)
		if err != nil {
			return nil, err
		}
		v.Traces = append(v.Traces, t)
	}
	v.TimeAxis = opt.Time
	for _, t := range v.Traces {
		v.TimeAxis = v.TimeAxis && t.timed
	}
	for _, t := range v.Traces {
		t.hasTime = v.TimeAxis
		t.placeMarks()
	}
	return v, nil
}

func shortName(in *pipeline.Input) string {
	if in.Sample {
		return "mlp_train (built-in sample)"
	}
	return filepath.Base(in.Path)
}

// batchEvents is how many events the decoding goroutine hands on at once.
const batchEvents = 1024

func loadRecorded(ctx context.Context, in *pipeline.Input, warn func(string)) (*Trace, error) {
	rd, err := in.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	t := &Trace{Name: shortName(in), Label: "recorded"}
	b := newBuilder(t)
	b.ann, b.limit = in.Meta.Annotations, in.Meta.MemoryLimit
	// Decoding runs on its own goroutine, in batches, beside the index.
	full, free := make(chan []trace.Event, 4), make(chan []trace.Event, 6)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(full)
		batch := make([]trace.Event, 0, batchEvents)
		for rd.Next() {
			if ev := rd.Event(); ev.Kind.Valid() {
				batch = append(batch, *ev)
			}
			if len(batch) < batchEvents {
				continue
			}
			select {
			case full <- batch:
			case <-stop:
				return
			}
			select {
			case batch = <-free:
			default:
				batch = make([]trace.Event, 0, batchEvents)
			}
		}
		select {
		case full <- batch:
		case <-stop:
		}
	}()
	defer func() { close(stop); <-done }()
	for batch := range full {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := range batch {
			b.add(&batch[i])
		}
		select {
		case free <- batch[:0]:
		default:
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	if rd.Truncated() && warn != nil {
		warn(fmt.Sprintf("%s ends without its end-of-stream marker (a killed recording?): viewing the events of its whole batches", in.Name))
	}
	t.stacks = rd.Stacks()
	return t, b.finish(warn)
}

func loadReplay(ctx context.Context, in *pipeline.Input, s pipeline.Settings) (*Trace, error) {
	r, err := in.Resolve(s)
	if err != nil {
		return nil, err
	}
	t := &Trace{Name: shortName(in), Label: "replayed: " + r.Label}
	b := newBuilder(t)
	b.ann, b.limit = in.Meta.Annotations, r.Limit
	run, err := pipeline.Replay(ctx, in, r, pipeline.Options{Observe: b.add})
	if err != nil {
		return nil, err
	}
	t.stacks = run.Stacks
	return t, b.finish(in.Warn)
}
