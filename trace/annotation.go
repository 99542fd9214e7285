package trace

import (
	"encoding/json"
	"fmt"
	"sort"
)

// MetaAnnotations is the schema metadata key of a trace's annotations (see
// Annotation), a JSON array written only when there are some.
const MetaAnnotations = "tracer.annotations"

// Annotation is one edge of a user scope that PyTorch recorded beside the
// allocator events: torch.profiler.record_function("forward") and the
// scopes PyTorch opens itself (Optimizer.step#Adam.step, ...) enter with a
// Stage of AnnotationStart and leave with AnnotationEnd, on the device that
// was current. TimeUs is on the events' clock, so an event at time t lies
// inside every scope of its device entered at or before t and not yet left.
type Annotation struct {
	Name   string `json:"name"`
	Stage  string `json:"stage"` // AnnotationStart or AnnotationEnd
	Device int32  `json:"device"`
	TimeUs int64  `json:"time_us"`
}

// Annotation stages, as PyTorch's external_annotations spell them.
const (
	AnnotationStart = "START"
	AnnotationEnd   = "END"
)

// SortAnnotations orders as by time, stably, so that entries of one moment
// keep their recorded order; PyTorch records them in order already, and
// this makes a trace from another producer safe to walk in time.
func SortAnnotations(as []Annotation) {
	sort.SliceStable(as, func(i, j int) bool { return as[i].TimeUs < as[j].TimeUs })
}

func encodeAnnotations(as []Annotation) string {
	b, err := json.Marshal(as)
	if err != nil { // plain strings and integers always encode
		panic("invariant violation: annotations do not encode: " + err.Error())
	}
	return string(b)
}

func decodeAnnotations(s string) ([]Annotation, error) {
	var as []Annotation
	if err := json.Unmarshal([]byte(s), &as); err != nil {
		return nil, fmt.Errorf("bad %s metadata: %v", MetaAnnotations, err)
	}
	for i, a := range as {
		if a.Stage != AnnotationStart && a.Stage != AnnotationEnd {
			return nil, fmt.Errorf("bad %s metadata: entry %d has stage %q, want %q or %q",
				MetaAnnotations, i, a.Stage, AnnotationStart, AnnotationEnd)
		}
	}
	return as, nil
}
