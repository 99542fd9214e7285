package analysis

import (
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// Each event belongs to the innermost scope open on its device at its time:
// a scope left without being entered was open from the start, one entered
// and left before the first event is not a run of the trace, a scope ends
// before an event of its END's time, and the blocks live at the allocated
// peak count for the phase that allocated them.
func TestSummarizer_phases(t *testing.T) {
	ann := func(name, stage string, dev int32, at int64) trace.Annotation {
		return trace.Annotation{Name: name, Stage: stage, Device: dev, TimeUs: at}
	}
	const S, E = trace.AnnotationStart, trace.AnnotationEnd
	opt := Options{Annotations: []trace.Annotation{
		ann("warmup", S, 0, 900), ann("warmup", E, 0, 950), // before the first event: no run
		ann("elsewhere", S, 1, 1000),
		ann("forward", S, 0, 1005), ann("forward", E, 0, 1035),
		ann("backward", S, 0, 1035), ann("backward", E, 0, 1055),
		ann("Optimizer.step#Adam.step", S, 0, 1055), ann("Optimizer.step#Adam.step", E, 0, 1075),
		ann("ProfilerStep#3", E, 0, 1080), // entered before the history
	}}
	sum := run(t, opt, true, // event i at 1000 + 10·i µs
		segAlloc(0, 20*MiB),           // 0: ProfilerStep
		alloc(0, 4*MiB, 4*MiB, 1),     // 1: forward
		alloc(4*MiB, 2*MiB, 2*MiB, 1), // 2: forward
		freeReq(4*MiB),                // 3: forward
		alloc(6*MiB, 3*MiB, 3*MiB, 2), // 4: backward, the allocated peak (7 MiB)
		freeReq(0),                    // 5: backward
		alloc(0, MiB, MiB, 3),         // 6: Optimizer.step
		freeReq(0),                    // 7: Optimizer.step
		alloc(0, 512*KiB, 512*KiB, 4), // 8: outside (ProfilerStep ended at 1080)
	)
	want := []Phase{
		{Name: "ProfilerStep", Runs: 1, Events: 1, TimeUs: 10, PeakReservedBytes: 20 * MiB},
		{Name: "forward", Runs: 1, Events: 3, TimeUs: 30, Allocs: 2, AllocatedBytes: 6 * MiB,
			PeakAllocatedBytes: 6 * MiB, PeakReservedBytes: 20 * MiB, LiveAtPeakBytes: 4 * MiB, LiveAtPeakBlocks: 1},
		{Name: "backward", Runs: 1, Events: 2, TimeUs: 20, Allocs: 1, AllocatedBytes: 3 * MiB,
			PeakAllocatedBytes: 7 * MiB, PeakReservedBytes: 20 * MiB, LiveAtPeakBytes: 3 * MiB, LiveAtPeakBlocks: 1},
		{Name: "Optimizer.step#Adam.step", Runs: 1, Events: 2, TimeUs: 20, Allocs: 1, AllocatedBytes: MiB,
			PeakAllocatedBytes: 4 * MiB, PeakReservedBytes: 20 * MiB},
		{Name: OutsidePhases, Events: 1, Allocs: 1, AllocatedBytes: 512 * KiB,
			PeakAllocatedBytes: 3*MiB + 512*KiB, PeakReservedBytes: 20 * MiB},
	}
	if !reflect.DeepEqual(sum.Phases, want) {
		t.Errorf("phases:\n got %+v\nwant %+v", sum.Phases, want)
	}
	if sum.AllocatedPeakPhase != "backward" || sum.ReservedPeakPhase != "ProfilerStep" {
		t.Errorf("peak phases %q, %q; want backward, ProfilerStep", sum.AllocatedPeakPhase, sum.ReservedPeakPhase)
	}
	var spans []string
	for _, sp := range sum.Timeline.Phases {
		spans = append(spans, sp.Phase)
	}
	if want := []string{"ProfilerStep", "forward", "backward", "Optimizer.step#Adam.step", OutsidePhases}; !reflect.DeepEqual(spans, want) {
		t.Errorf("spans %q, want %q", spans, want)
	}
}

// Without annotations for its device, a Summary has an empty phase list.
func TestSummarizer_noPhases(t *testing.T) {
	opt := Options{Device: 0, Annotations: []trace.Annotation{{Name: "x", Stage: trace.AnnotationStart, Device: 3, TimeUs: 1}}}
	sum := run(t, opt, true, segAlloc(0, 2*MiB), alloc(0, 512, 512, 1))
	if sum.Phases == nil || len(sum.Phases) != 0 || sum.Timeline.Phases != nil {
		t.Errorf("phases %#v, spans %#v; want none", sum.Phases, sum.Timeline.Phases)
	}
}

func TestPhaseName(t *testing.T) {
	for in, want := range map[string]string{
		"ProfilerStep#12": "ProfilerStep", "Optimizer.step#Adam.step": "Optimizer.step#Adam.step",
		"forward": "forward", "a#": "a#", "#7": "",
	} {
		if got := PhaseName(in); got != want {
			t.Errorf("PhaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Merging spans keeps them ordered, covering every event, and bounded.
func TestPhases_spansBounded(t *testing.T) {
	var as []trace.Annotation
	for i := int64(0); i < 3*maxPhaseSpans; i++ {
		as = append(as, trace.Annotation{Name: "layer", Stage: trace.AnnotationStart, TimeUs: 10 * i},
			trace.Annotation{Name: "layer", Stage: trace.AnnotationEnd, TimeUs: 10*i + 5})
	}
	s := NewSummarizer(Options{Annotations: as})
	n := int64(6 * maxPhaseSpans)
	for i := int64(0); i < n; i++ {
		ev := trace.Event{Seq: i, TimeUs: 5*i + 1, Kind: trace.KindSnapshot, Stack: trace.NoStack}
		s.Event(&ev)
	}
	sp := s.Finalize().Timeline.Phases
	if len(sp) > maxPhaseSpans || len(sp) == 0 {
		t.Fatalf("%d spans, want 1 to %d", len(sp), maxPhaseSpans)
	}
	if sp[0].FirstEvent != 0 || sp[len(sp)-1].LastEvent != n-1 {
		t.Errorf("spans cover %d to %d, want 0 to %d", sp[0].FirstEvent, sp[len(sp)-1].LastEvent, n-1)
	}
	for i := 1; i < len(sp); i++ {
		if sp[i].FirstEvent != sp[i-1].LastEvent+1 || sp[i].Phase == sp[i-1].Phase {
			t.Fatalf("span %d %+v after %+v", i, sp[i], sp[i-1])
		}
	}
}

// Scopes that never end keep at most maxDepth open: 200k of them and as
// many ENDs of another name take linear time, and the innermost is still
// each event's phase.
func TestPhases_deepScopes(t *testing.T) {
	var as []trace.Annotation
	const n = 200_000
	for i := int64(0); i < n; i++ {
		as = append(as, trace.Annotation{Name: "open", Stage: trace.AnnotationStart, TimeUs: i + 1})
	}
	for i := int64(0); i < n; i++ {
		as = append(as, trace.Annotation{Name: "never entered", Stage: trace.AnnotationEnd, TimeUs: n + i + 1})
	}
	as = append(as, trace.Annotation{Name: "inner", Stage: trace.AnnotationStart, TimeUs: 3 * n})
	p := newPhases(as, 0)
	if len(p.open) > maxDepth {
		t.Fatalf("%d scopes open, want at most %d", len(p.open), maxDepth)
	}
	ev := trace.Event{TimeUs: 3*n + 1}
	if got := p.names[p.at(&ev)]; got != "inner" {
		t.Errorf("phase %q, want inner", got)
	}
	if len(p.open) > maxDepth {
		t.Errorf("%d scopes open after the events, want at most %d", len(p.open), maxDepth)
	}
}
