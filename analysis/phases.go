package analysis

import (
	"slices"
	"strings"

	"github.com/tracer-dev/tracer/trace"
)

// Phase is one record_function scope name (a phase of the program: forward,
// backward, Optimizer.step#Adam.step, the user's names) and what happened
// while it was the innermost scope open, or where an event was outside
// every scope (OutsidePhases) or before the recording (BeforeRecordingPhase).
type Phase struct {
	Name   string `json:"name"`
	Runs   int64  `json:"runs"`    // scopes of this name entered (one open at the start counts)
	Events int64  `json:"events"`  // events in it
	TimeUs int64  `json:"time_us"` // time it was the innermost scope, from the first event to the last
	Allocs int64  `json:"allocs"`  // allocations made in it
	// AllocatedBytes sums the block sizes of those allocations: the churn.
	AllocatedBytes Bytes `json:"allocated_bytes"`
	// PeakAllocatedBytes and PeakReservedBytes are the most allocated and
	// reserved bytes after any of its events.
	PeakAllocatedBytes Bytes `json:"peak_allocated_bytes"`
	PeakReservedBytes  Bytes `json:"peak_reserved_bytes"`
	// LiveAtPeakBytes and LiveAtPeakBlocks are the blocks allocated in it
	// and still allocated at the allocated peak: its share of the peak.
	LiveAtPeakBytes  Bytes `json:"live_at_peak_bytes"`
	LiveAtPeakBlocks int64 `json:"live_at_peak_blocks"`
}

// Names of the phases that are not a scope.
const (
	OutsidePhases        = "(outside any scope)"
	BeforeRecordingPhase = "(before the recording)"
)

// PhaseSpan is a run of consecutive events in one phase, for plots:
// events FirstEvent to LastEvent, at FirstTimeUs to LastTimeUs.
type PhaseSpan struct {
	Phase       string `json:"phase"`
	FirstEvent  int64  `json:"first_event"`
	LastEvent   int64  `json:"last_event"`
	FirstTimeUs int64  `json:"first_time_us"`
	LastTimeUs  int64  `json:"last_time_us"`
	events      int64
	id          int32 // the phase's index in phases
}

// PhaseName is the name a scope's phase goes by: its name without a
// trailing "#<digits>", so that the profiler's ProfilerStep#1, #2, ... are
// one phase, while Optimizer.step#Adam.step keeps its name.
func PhaseName(scope string) string {
	i := strings.LastIndexByte(scope, '#')
	if i < 0 || i == len(scope)-1 {
		return scope
	}
	for _, c := range scope[i+1:] {
		if c < '0' || c > '9' {
			return scope
		}
	}
	return scope[:i]
}

// Phase indexes: the two that are not scopes, then the names in order of
// first appearance.
const (
	phaseOutside = 0
	phaseBefore  = 1
)

// maxPhases bounds the distinct phase names kept (a program may name its
// scopes by step or layer); the names beyond share one, "(other scopes)".
const maxPhases = 1024

// maxPhaseSpans bounds the spans kept for plots; past it, neighbours merge
// (phases.mergeSpans), as timeline buckets do.
const maxPhaseSpans = 4096

// maxDepth bounds the scopes open at once: real nesting is a few dozen
// deep, and a trace whose scopes never end must not make each END search
// an ever longer stack. Past it, the outermost scope is dropped.
const maxDepth = 256

// push returns open with id entered, within maxDepth.
func push[T any](open []T, id T) []T {
	if len(open) == maxDepth {
		open = append(open[:0], open[1:]...)
	}
	return append(open, id)
}

// phaseAgg is what a phase gathered so far.
type phaseAgg struct {
	runs, events, timeUs, allocs, allocBytes int64
	peakAlloc, peakRes                       int64
	live, liveBlocks                         int64 // allocated in it, allocated now
	atPeak, atPeakBlocks                     int64 // live and liveBlocks at the allocated peak
}

// phases follows the scopes of one device's annotations as events come, in
// time order: the innermost open scope is each event's phase. It costs a
// compare per event and an update of the phase's sums.
type phases struct {
	ann   []trace.Annotation // the device's, in time order
	next  int                // the first not applied
	open  []int32            // phase indexes of the open scopes, innermost last
	names []string
	index map[string]int32
	agg   []phaseAgg

	cur    int32               // the innermost open scope's phase (top)
	timed  bool                // an event carried time: since and lastT are set
	since  int64               // when cur became current, or the first event
	lastT  int64               // the last event's time
	peakAt [Reserved + 1]int32 // the phase of the allocated and reserved peaks
	spans  []PhaseSpan
}

// newPhases returns the tracker of device's scopes in as, or nil when the
// device has none.
func newPhases(as []trace.Annotation, device int32) *phases {
	p := &phases{index: map[string]int32{}, names: []string{OutsidePhases, BeforeRecordingPhase}}
	p.agg = make([]phaseAgg, 2)
	p.ann = as // shared, read only, when every one is the device's
	for i, a := range as {
		if a.Device != device {
			p.ann = slices.Clone(as[:i])
			for _, a := range as[i:] {
				if a.Device == device {
					p.ann = append(p.ann, a)
				}
			}
			break
		}
	}
	if len(p.ann) == 0 {
		return nil
	}
	// A scope left without having been entered in the history was open at
	// its start (PyTorch's ring buffer wrapped, or recording began inside
	// it): it is open from the first event. The later such END is the outer
	// scope.
	var open []string
	var unmatched []string
	for _, a := range p.ann {
		if a.Stage == trace.AnnotationStart {
			open = push(open, a.Name)
			continue
		}
		if i := lastIndex(open, a.Name); i >= 0 {
			open = append(open[:i], open[i+1:]...)
		} else {
			unmatched = append(unmatched, a.Name)
		}
	}
	for i := len(unmatched) - 1; i >= 0; i-- {
		p.open = push(p.open, p.id(unmatched[i]))
	}
	p.cur = p.top()
	return p
}

func lastIndex(names []string, name string) int {
	for i := len(names) - 1; i >= 0; i-- {
		if names[i] == name {
			return i
		}
	}
	return -1
}

// id returns the index of scope's phase, adding it when new.
func (p *phases) id(scope string) int32 {
	name := PhaseName(scope)
	if id, ok := p.index[name]; ok {
		return id
	}
	if len(p.names) >= maxPhases {
		name = "(other scopes)"
		if id, ok := p.index[name]; ok {
			return id
		}
	}
	id := int32(len(p.names))
	p.names = append(p.names, name)
	p.index[name] = id
	p.agg = append(p.agg, phaseAgg{})
	return id
}

// top is the innermost open scope's phase.
func (p *phases) top() int32 {
	if n := len(p.open); n > 0 {
		return p.open[n-1]
	}
	return phaseOutside
}

// at applies the annotations up to ev's time and returns ev's phase. An
// event costs a compare when no scope starts or ends before it: time is
// given to a phase when it stops being the current one (and at the end).
func (p *phases) at(ev *trace.Event) int32 {
	if ev.Flags&trace.FlagReconstructed != 0 {
		return phaseBefore
	}
	t := ev.TimeUs
	if t == 0 {
		return p.cur
	}
	if !p.timed {
		p.begin(t)
	}
	for p.next < len(p.ann) && p.ann[p.next].TimeUs <= t {
		a := &p.ann[p.next]
		p.next++
		if a.TimeUs > p.since {
			p.agg[p.cur].timeUs += a.TimeUs - p.since
			p.since = a.TimeUs
		}
		p.apply(a, true)
	}
	p.lastT = max(p.lastT, t)
	return p.cur
}

// begin applies the annotations up to t, the first event's time: scopes
// before it are not runs of this trace; those still open at it are, once
// each, and time is counted from it.
func (p *phases) begin(t int64) {
	for p.next < len(p.ann) && p.ann[p.next].TimeUs <= t {
		p.apply(&p.ann[p.next], false)
		p.next++
	}
	for _, id := range p.open {
		p.agg[id].runs++
	}
	p.timed, p.since, p.lastT = true, t, t
}

// apply enters or leaves a's scope, counting an entry as a run if asked.
func (p *phases) apply(a *trace.Annotation, run bool) {
	id := p.id(a.Name)
	if a.Stage == trace.AnnotationStart {
		p.open = push(p.open, id)
		if run {
			p.agg[id].runs++
		}
	} else {
		for i := len(p.open) - 1; i >= 0; i-- {
			if p.open[i] == id {
				p.open = append(p.open[:i], p.open[i+1:]...)
				break
			}
		}
	}
	p.cur = p.top()
}

// finish gives the current phase its time up to the last event.
func (p *phases) finish() {
	if p.timed && p.lastT > p.since {
		p.agg[p.cur].timeUs += p.lastT - p.since
		p.since = p.lastT
	}
}

// event adds the event n, in phase id, with allocated and reserved bytes
// after it, to the sums and the spans.
func (p *phases) event(id int32, n int64, ev *trace.Event, allocated, reserved int64) {
	a := &p.agg[id]
	a.events++
	a.peakAlloc = max(a.peakAlloc, allocated)
	a.peakRes = max(a.peakRes, reserved)
	k := len(p.spans)
	if k == maxPhaseSpans && p.spans[k-1].id != id {
		p.mergeSpans()
		k = len(p.spans)
	}
	if k > 0 && p.spans[k-1].id == id {
		sp := &p.spans[k-1]
		sp.LastEvent, sp.LastTimeUs = n, ev.TimeUs
		sp.events++
		return
	}
	p.spans = append(p.spans, PhaseSpan{Phase: p.names[id], FirstEvent: n, LastEvent: n,
		FirstTimeUs: ev.TimeUs, LastTimeUs: ev.TimeUs, events: 1, id: id})
}

// mergeSpans halves the spans: each pair becomes one span over both, in
// the phase of the one with more events, and a neighbour of its phase
// takes it in. Narrow spans go first; plots lose only what is too thin to
// see.
func (p *phases) mergeSpans() {
	out := p.spans[:0]
	for i := 0; i < len(p.spans); i += 2 {
		sp := p.spans[i]
		if i+1 < len(p.spans) {
			b := p.spans[i+1]
			if b.events > sp.events {
				sp.Phase, sp.id = b.Phase, b.id
			}
			sp.LastEvent, sp.LastTimeUs = b.LastEvent, b.LastTimeUs
			sp.events += b.events
		}
		if k := len(out); k > 0 && out[k-1].id == sp.id {
			out[k-1].LastEvent, out[k-1].LastTimeUs = sp.LastEvent, sp.LastTimeUs
			out[k-1].events += sp.events
			continue
		}
		out = append(out, sp)
	}
	p.spans = out
}

// alloc and free follow the bytes each phase holds allocated.
func (p *phases) alloc(id int32, size int64) {
	a := &p.agg[id]
	a.allocs++
	a.allocBytes += size
	a.live += size
	a.liveBlocks++
}

func (p *phases) free(id int32, size int64) {
	a := &p.agg[id]
	a.live -= size
	a.liveBlocks--
}

// snapshot copies the live sums as they stand at the allocated peak.
func (p *phases) snapshot() {
	for i := range p.agg {
		p.agg[i].atPeak, p.agg[i].atPeakBlocks = p.agg[i].live, p.agg[i].liveBlocks
	}
}

// result lists the phases that saw events or hold memory at the peak:
// scopes in order of first appearance, then the two that are not scopes.
func (p *phases) result() []Phase {
	p.finish()
	out := []Phase{}
	add := func(i int) {
		a := p.agg[i]
		if a.events == 0 && a.atPeakBlocks == 0 && a.runs == 0 {
			return
		}
		out = append(out, Phase{Name: p.names[i], Runs: a.runs, Events: a.events, TimeUs: a.timeUs,
			Allocs: a.allocs, AllocatedBytes: Bytes(a.allocBytes),
			PeakAllocatedBytes: Bytes(a.peakAlloc), PeakReservedBytes: Bytes(a.peakRes),
			LiveAtPeakBytes: Bytes(a.atPeak), LiveAtPeakBlocks: a.atPeakBlocks})
	}
	for i := 2; i < len(p.names); i++ {
		add(i)
	}
	add(phaseOutside)
	add(phaseBefore)
	return out
}

// ScopeCount is how many times the scopes of one phase name were entered.
type ScopeCount struct {
	Name    string `json:"name"`
	Entered int64  `json:"entered"`
}

// ScopeCounts counts the scopes entered in as, all devices together, by
// phase name (PhaseName) in order of first appearance.
func ScopeCounts(as []trace.Annotation) []ScopeCount {
	out := []ScopeCount{}
	at := map[string]int{}
	for _, a := range as {
		name := PhaseName(a.Name)
		i, ok := at[name]
		if !ok {
			i = len(out)
			at[name] = i
			out = append(out, ScopeCount{Name: name})
		}
		if a.Stage == trace.AnnotationStart {
			out[i].Entered++
		}
	}
	return out
}
