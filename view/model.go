package view

import (
	"fmt"
	"sort"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/internal/addrmap"
	"github.com/tracer-dev/tracer/trace"
)

// event is one event of the viewed device, as much of trace.Event as the
// analysis reads: a trace of millions of events is kept once (eventStore),
// and a moment's state is rebuilt from it (see Trace.stateAt). It holds no
// pointer, so that it may live in a mapped file.
type event struct {
	addr, stream uint64
	size, bsize  int64
	timeUs       int64
	stack        trace.StackID
	kind         trace.Kind
	flags        trace.Flags
}

func (e *event) full(dev int32, seq int64) trace.Event {
	return trace.Event{Seq: seq, TimeUs: e.timeUs, Device: dev, Kind: e.kind, Addr: e.addr, Size: e.size,
		Stream: e.stream, Stack: e.stack, Flags: e.flags, BlockSize: e.bsize}
}

// Trace is one trace (recorded, or a replay under other settings) loaded
// for viewing: its events, a min/max pyramid of its byte series, states
// every so many events to resume from, and its marks. It is read-only once
// loaded: requests are served at once.
type Trace struct {
	Name   string // the file, or the sample's name
	Label  string // the legend's: "recorded" or the replay's settings
	Device int32  // the CUDA device viewed (the first event's)

	evs    []event
	stacks []trace.Stack
	// phaseMarks are the record_function scopes as marks (phases.go).
	phaseMarks []Mark
	timed      bool  // some events carry a time
	t0         int64 // the first timed event's TimeUs
	// hasTime: x is time (View.TimeAxis), else the event index.
	hasTime bool

	pyr pyramid
	// cps[k] is the state after event k·every−1 (cps[0] is empty).
	cps   []*analysis.State
	every int64
	// freeAt[i], for an alloc event i, is the index of the block's
	// free_requested, or -1 when the block is live at the end.
	freeAt []int32
	// xmax[k] is the largest time x (tx) of the events before k·xBlock.
	xmax []int64

	sum   *analysis.Summary
	marks []Mark
}

// Mark is a moment worth a look, drawn on the timeline.
type Mark struct {
	Kind  string `json:"kind"` // oom, empty_cache, peak_allocated, peak_reserved, phase
	Event int64  `json:"event"`
	// EndEvent is the last event of a range mark (a phase), else Event.
	EndEvent int64  `json:"end_event"`
	Label    string `json:"label"`
	// X and EndX are Event's and EndEvent's x on the axis.
	X    int64 `json:"x"`
	EndX int64 `json:"end_x"`
}

const (
	xBlock = 256 // events per entry of Trace.xmax
	// checkpointBytes bounds the memory of a trace's resume states: past
	// it, every other state is dropped and the spacing doubles.
	checkpointBytes = 256 << 20
	minEvery        = 1 << 14
	maxCheckpoints  = 64 // past it, the spacing doubles
	// maxEvents: event indexes are kept as int32 (freeAt).
	maxEvents = 1<<31 - 1
)

// builder indexes a trace as its events come: one pass of an
// analysis.Summarizer fills the pyramid, the resume states, freeAt and the
// marks, while the next events are still being decoded.
type builder struct {
	t       *Trace
	ann     []trace.Annotation   // the trace's record_function scopes
	limit   int64                // the per-process memory limit the events ran under, 0 for none
	phases  *phaseMarks          // made with s, for its device
	s       *analysis.Summarizer // made at the first event, which decides the device
	skipped int64                // events of other devices
	store   *eventStore
	live    addrmap.Map[int32] // alloc event of each live block, by address
	cpBytes int64
	runMax  int64 // the largest time x so far
	err     error
}

func newBuilder(t *Trace) *builder {
	t.every = minEvery
	t.pyr = pyramid{levels: [][]span{nil}}
	t.cps = []*analysis.State{{Event: -1, Segments: []analysis.SegmentState{}, Outside: []analysis.BlockState{}}}
	return &builder{t: t, store: newEventStore()}
}

// add appends ev and indexes it, if it is of the trace's device: the first
// event's.
func (b *builder) add(ev *trace.Event) {
	t := b.t
	if b.s == nil {
		t.Device = ev.Device
		b.s = analysis.NewSummarizer(analysis.Options{Device: t.Device, Stacks: t.stack, MaxOOMs: 64, MemoryLimit: b.limit})
		b.phases = newPhaseMarks(b.ann, t.Device)
	}
	if ev.Device != t.Device {
		b.skipped++
		return
	}
	i := b.store.n
	if i >= maxEvents {
		if b.err == nil {
			b.err = fmt.Errorf("%s: more than %d events on device %d; the view holds at most that many", t.Name, maxEvents, t.Device)
		}
		return
	}
	if ev.TimeUs != 0 && !t.timed {
		t.timed, t.t0 = true, ev.TimeUs
	}
	b.store.add(event{addr: ev.Addr, stream: ev.Stream, size: ev.Size, bsize: ev.BlockSize,
		timeUs: ev.TimeUs, stack: ev.Stack, kind: ev.Kind, flags: ev.Flags})
	b.phases.event(i, ev.TimeUs)
	if i%xBlock == 0 {
		t.xmax = append(t.xmax, b.runMax)
	}
	b.runMax = max(b.runMax, t.txOf(ev.TimeUs))
	e := *ev
	e.Seq = i
	b.s.Event(&e)
	t.pyr.set(i, b.s.Levels())
	t.freeAt = append(t.freeAt, -1)
	switch ev.Kind {
	case trace.KindAlloc:
		b.live.Put(ev.Addr, int32(i))
	case trace.KindFreeRequested:
		if j, ok := b.live.Take(ev.Addr); ok {
			t.freeAt[j] = int32(i)
		}
	case trace.KindEmptyCache:
		t.marks = append(t.marks, Mark{Kind: "empty_cache", Event: i, EndEvent: i,
			Label: "empty_cache() released " + analysis.Bytes(ev.Size).String()})
	}
	if (i+1)%t.every == 0 {
		st := b.s.State()
		t.cps = append(t.cps, st)
		b.cpBytes += stateBytes(st)
		if b.cpBytes > checkpointBytes || len(t.cps) > maxCheckpoints {
			b.cpBytes = t.thinCheckpoints()
		}
	}
}

// finish completes the index, warning of the events of other devices.
func (b *builder) finish(warn func(string)) error {
	if b.err != nil {
		b.store.close()
		return b.err
	}
	if b.skipped > 0 && warn != nil {
		warn(fmt.Sprintf("%s: viewing device %d; %d events of other devices left out", b.t.Name, b.t.Device, b.skipped))
	}
	if b.s == nil {
		b.s = analysis.NewSummarizer(analysis.Options{})
	}
	b.t.evs = b.store.events(b.t)
	b.t.pyr.finish()
	b.t.sum = b.s.Finalize()
	if b.phases != nil {
		b.phases.finish(b.t.Events())
		b.t.phaseMarks = b.phases.marks
	}
	b.t.addMarks()
	return nil
}

// thinCheckpoints keeps every other resume state, doubling the spacing,
// and returns the bytes of those kept.
func (t *Trace) thinCheckpoints() int64 {
	kept := t.cps[:0]
	var b int64
	for k, st := range t.cps {
		if k%2 == 0 {
			kept = append(kept, st)
			b += stateBytes(st)
		}
	}
	for k := len(kept); k < len(t.cps); k++ {
		t.cps[k] = nil
	}
	t.cps, t.every = kept, 2*t.every
	return b
}

func stateBytes(st *analysis.State) int64 {
	b := int64(len(st.Segments)) * 96
	for _, g := range st.Segments {
		b += int64(len(g.Live)) * 48
	}
	return b + int64(len(st.Outside))*48
}

// addMarks adds the peaks and OOMs of the summary, and the record_function
// phases, to the marks, ordered by event.
func (t *Trace) addMarks() {
	p := t.sum.Peaks
	t.marks = append(t.marks,
		Mark{Kind: "peak_allocated", Event: p.Allocated.Event, EndEvent: p.Allocated.Event,
			Label: "allocated peak " + p.Allocated.Bytes.String()},
		Mark{Kind: "peak_reserved", Event: p.Reserved.Event, EndEvent: p.Reserved.Event,
			Label: "reserved peak " + p.Reserved.Bytes.String()})
	for _, o := range t.sum.OOMs {
		t.marks = append(t.marks, Mark{Kind: "oom", Event: o.Event, EndEvent: o.Event, Label: oomVerdict(&o)})
	}
	t.marks = append(t.marks, t.phaseMarks...)
	sort.SliceStable(t.marks, func(i, j int) bool { return t.marks[i].Event < t.marks[j].Event })
}

// placeMarks sets the marks' x, once the axis is known.
func (t *Trace) placeMarks() {
	for k := range t.marks {
		m := &t.marks[k]
		m.Event, m.EndEvent = min(m.Event, t.Events()-1), min(m.EndEvent, t.Events()-1)
		if m.Event >= 0 {
			m.X, m.EndX = t.x(m.Event), t.x(m.EndEvent)
		}
	}
}

// oomVerdict says why a request failed, as analysis decides it (OOM.Cause):
// the live blocks and the request exceed what the process could hold (the
// limit), or they fit but no free block on the stream was large enough
// (fragmentation).
func oomVerdict(o *analysis.OOM) string {
	why := fmt.Sprintf("the limit: %s live and the request exceed the %s the process could hold", o.LiveBytes, o.CapacityBytes)
	if o.Cause == analysis.CauseFragmentation {
		why = fmt.Sprintf("fragmentation: %s live and the request fit in the %s the process could hold, but the largest free block on the stream was %s (%s free beside live blocks)",
			o.LiveBytes, o.CapacityBytes, o.LargestFreeStream, o.FreeBesideLiveBytes)
	}
	return fmt.Sprintf("OOM: %s requested with %s reserved; %s", o.Request, o.Reserved, why)
}

func (t *Trace) stack(id trace.StackID) trace.Stack {
	if id < 0 || int(id) >= len(t.stacks) {
		return nil
	}
	return t.stacks[id]
}

// Events returns the number of events viewed.
func (t *Trace) Events() int64 { return int64(len(t.evs)) }

// Summary returns the analysis of the viewed events.
func (t *Trace) Summary() *analysis.Summary { return t.sum }

// tx is event i's time since t0 in µs (0 for an untimed event), before
// the running maximum.
func (t *Trace) tx(i int64) int64 { return t.txOf(t.evs[i].timeUs) }

func (t *Trace) txOf(timeUs int64) int64 {
	if !t.timed || timeUs == 0 {
		return 0
	}
	return max(timeUs-t.t0, 0)
}

// x is event i's x: time since t0 (never before an earlier event's), or
// its index. O(xBlock).
func (t *Trace) x(i int64) int64 {
	if !t.hasTime {
		return i
	}
	k := i / xBlock
	m := t.xmax[k]
	for j := k * xBlock; j <= i; j++ {
		m = max(m, t.tx(j))
	}
	return m
}

// firstAt returns the first event whose x is at least x (n if none).
func (t *Trace) firstAt(x int64) int64 {
	n := int64(len(t.evs))
	if !t.hasTime {
		return min(max(x, 0), n)
	}
	// The last block starting at or below x holds the answer, or it is
	// the next block's first event.
	k := sort.Search(len(t.xmax), func(k int) bool { return t.xmax[k] >= x }) - 1
	if k < 0 {
		return 0
	}
	m := t.xmax[k]
	for j := int64(k) * xBlock; j < n; j++ {
		m = max(m, t.tx(j))
		if m >= x {
			return j
		}
	}
	return n
}

// resume returns a Summarizer in the state after event i-1 (i = 0: none),
// from the nearest resume state at or before it.
func (t *Trace) resume(i int64) *analysis.Summarizer {
	k := min(i/t.every, int64(len(t.cps)-1))
	s := analysis.Resume(analysis.Options{Device: t.Device, Stacks: t.stack}, t.cps[k])
	for j := k * t.every; j < i; j++ {
		ev := t.evs[j].full(t.Device, j)
		s.Event(&ev)
	}
	return s
}

// stateAt returns the state after event i.
func (t *Trace) stateAt(i int64) *analysis.State {
	s := t.resume(i + 1)
	return s.State()
}
