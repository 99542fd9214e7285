package view

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/tracer-dev/tracer/internal/pipeline"
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
		v.TimeAxis = v.TimeAxis && t.hasTime
	}
	for _, t := range v.Traces {
		t.hasTime = v.TimeAxis // x is the event index for all when one lacks time
		if err := build(ctx, t); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func shortName(in *pipeline.Input) string {
	if in.Sample {
		return "mlp_train (built-in sample)"
	}
	return filepath.Base(in.Path)
}

// collector keeps the events of one device: the first event's.
type collector struct {
	t       *Trace
	started bool
	skipped int64
}

func (c *collector) add(ev *trace.Event) {
	if !c.started {
		c.started, c.t.Device = true, ev.Device
	}
	if ev.Device != c.t.Device {
		c.skipped++
		return
	}
	if ev.TimeUs != 0 && !c.t.hasTime {
		c.t.hasTime, c.t.t0 = true, ev.TimeUs
	}
	c.t.evs = append(c.t.evs, event{addr: ev.Addr, stream: ev.Stream, size: ev.Size, bsize: ev.BlockSize,
		timeUs: ev.TimeUs, stack: ev.Stack, kind: ev.Kind, flags: ev.Flags})
}

func (c *collector) warn(warn func(string)) {
	if c.skipped > 0 && warn != nil {
		warn(fmt.Sprintf("%s: viewing device %d; %d events of other devices left out", c.t.Name, c.t.Device, c.skipped))
	}
}

func loadRecorded(ctx context.Context, in *pipeline.Input, warn func(string)) (*Trace, error) {
	rd, err := in.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	c := &collector{t: &Trace{Name: shortName(in), Label: "recorded"}}
	for i := 0; rd.Next(); i++ {
		if i%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if ev := rd.Event(); ev.Kind.Valid() {
			c.add(ev)
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	if rd.Truncated() && warn != nil {
		warn(fmt.Sprintf("%s ends without its end-of-stream marker (a killed recording?): viewing the events of its whole batches", in.Name))
	}
	c.warn(warn)
	c.t.stacks = rd.Stacks()
	return c.t, nil
}

func loadReplay(ctx context.Context, in *pipeline.Input, s pipeline.Settings) (*Trace, error) {
	r, err := in.Resolve(s)
	if err != nil {
		return nil, err
	}
	c := &collector{t: &Trace{Name: shortName(in), Label: "replayed: " + r.Label}}
	run, err := pipeline.Replay(ctx, in, r, pipeline.Options{Observe: c.add})
	if err != nil {
		return nil, err
	}
	c.warn(in.Warn)
	c.t.stacks = run.Stacks
	return c.t, nil
}
