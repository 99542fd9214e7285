package view

import "github.com/tracer-dev/tracer/trace"

// Phase marks: PyTorch's record_function scopes (trace.Meta.Annotations),
// turned into ranges of events as the events arrive.
const (
	maxPhaseMarks = 10000 // past it, later scopes are not marked
	maxOpenScopes = 256   // deeper nesting is not marked
)

// phaseMarks follows the scopes of the viewed device through the events:
// a scope spans the events from the first at or after its start to the
// last before its end; one that holds no event is not marked.
type phaseMarks struct {
	ann   []trace.Annotation // the device's, in time order
	next  int
	open  []openScope
	marks []Mark
}

type openScope struct {
	name  string
	event int64
}

func newPhaseMarks(all []trace.Annotation, device int32) *phaseMarks {
	p := &phaseMarks{}
	for _, a := range all {
		if a.Device == device {
			p.ann = append(p.ann, a)
		}
	}
	trace.SortAnnotations(p.ann)
	return p
}

// event notes event i, at timeUs (0: untimed, which moves no scope).
func (p *phaseMarks) event(i, timeUs int64) {
	if timeUs == 0 {
		return
	}
	for p.next < len(p.ann) && p.ann[p.next].TimeUs <= timeUs {
		a := &p.ann[p.next]
		p.next++
		switch a.Stage {
		case trace.AnnotationStart:
			if len(p.open) < maxOpenScopes {
				p.open = append(p.open, openScope{a.Name, i})
			}
		case trace.AnnotationEnd:
			for k := len(p.open) - 1; k >= 0; k-- {
				if p.open[k].name == a.Name {
					p.close(p.open[k], i-1)
					p.open = append(p.open[:k], p.open[k+1:]...)
					break
				}
			}
		}
	}
}

// finish closes the scopes still open at the last event, n-1.
func (p *phaseMarks) finish(n int64) {
	for k := len(p.open) - 1; k >= 0; k-- {
		p.close(p.open[k], n-1)
	}
	p.open = nil
}

func (p *phaseMarks) close(s openScope, last int64) {
	if last >= s.event && len(p.marks) < maxPhaseMarks {
		p.marks = append(p.marks, Mark{Kind: "phase", Event: s.event, EndEvent: last, Label: s.name})
	}
}

// pointMarks are the marks of single moments (peaks, OOMs, empty_cache
// calls), which the report keeps its detail for; phases are ranges.
func (t *Trace) pointMarks() []Mark {
	var out []Mark
	for _, m := range t.marks {
		if m.Kind != "phase" {
			out = append(out, m)
		}
	}
	return out
}
