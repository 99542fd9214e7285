package view

import (
	"context"
	"testing"

	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/trace"
)

// The built-in sample's record_function scopes (Adam's step and zero_grad,
// eight each) become phase marks whose events lie inside their scopes, and
// the report's details stay on the peaks.
func TestPhaseMarks(t *testing.T) {
	v, err := Load(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := v.Traces[0]
	var spans [][2]int64 // each Adam.step scope's [start, end] µs
	var open int64
	for _, a := range sampleAnnotations(t) {
		if a.Name != "Optimizer.step#Adam.step" {
			continue
		}
		if a.Stage == trace.AnnotationStart {
			open = a.TimeUs
		} else {
			spans = append(spans, [2]int64{open, a.TimeUs})
		}
	}
	if len(spans) != 8 {
		t.Fatalf("the sample has %d Adam.step scopes, want 8", len(spans))
	}
	steps := 0
	for _, m := range tr.marks {
		if m.Kind != "phase" || m.Label != "Optimizer.step#Adam.step" {
			continue
		}
		s := spans[steps]
		steps++
		if m.Event > m.EndEvent {
			t.Errorf("mark %+v ends before it starts", m)
		}
		for _, e := range []int64{m.Event, m.EndEvent} {
			if ts := tr.evs[e].timeUs; ts < s[0] || ts >= s[1] {
				t.Errorf("mark %+v: event %d at %d µs, outside its scope [%d, %d)", m, e, ts, s[0], s[1])
			}
		}
		if m.Event > 0 && tr.evs[m.Event-1].timeUs >= s[0] {
			t.Errorf("mark %+v: event %d, before it, is inside the scope too", m, m.Event-1)
		}
	}
	if steps != 8 {
		t.Errorf("%d Adam.step marks, want 8", steps)
	}
	for _, m := range tr.pointMarks() {
		if m.Kind == "phase" {
			t.Errorf("point marks hold a phase: %+v", m)
		}
	}
	if len(tr.pointMarks()) < 2 {
		t.Errorf("point marks %v: want the two peaks at least", tr.pointMarks())
	}
}

func sampleAnnotations(t *testing.T) []trace.Annotation {
	t.Helper()
	in, err := pipeline.Open("")
	if err != nil {
		t.Fatal(err)
	}
	return in.Meta.Annotations
}
