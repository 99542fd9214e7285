package trace

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
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

// encodeAnnotations returns json.Marshal(as), written by hand where every
// name and stage is printable ASCII that JSON takes as it is (no quote,
// backslash, or <, >, & that encoding/json escapes), as PyTorch's are:
// a trace holds up to 100,000 annotations, and encoding/json's
// reflection cost as much as laying out a small import's events.
func encodeAnnotations(as []Annotation) string {
	if len(as) == 0 {
		return marshalAnnotations(as)
	}
	size := 2
	for i := range as {
		if !plainJSON(as[i].Name) || !plainJSON(as[i].Stage) {
			return marshalAnnotations(as)
		}
		size += len(as[i].Name) + len(as[i].Stage) + 80
	}
	var sb strings.Builder
	sb.Grow(size)
	var num [20]byte
	sb.WriteByte('[')
	for i := range as {
		a := &as[i]
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"name":"`)
		sb.WriteString(a.Name)
		sb.WriteString(`","stage":"`)
		sb.WriteString(a.Stage)
		sb.WriteString(`","device":`)
		sb.Write(strconv.AppendInt(num[:0], int64(a.Device), 10))
		sb.WriteString(`,"time_us":`)
		sb.Write(strconv.AppendInt(num[:0], a.TimeUs, 10))
		sb.WriteByte('}')
	}
	sb.WriteByte(']')
	return sb.String()
}

// plainJSON reports whether encoding/json writes s between quotes as it is.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

// plainByte is which bytes encoding/json writes in a string as they are:
// printable ASCII but for the quote, the backslash and its HTML escapes.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = !strings.ContainsRune(`"\<>&`, rune(c))
	}
	return t
}()

func marshalAnnotations(as []Annotation) string {
	b, err := json.Marshal(as)
	if err != nil { // plain strings and integers always encode
		panic("invariant violation: annotations do not encode: " + err.Error())
	}
	return string(b)
}

func decodeAnnotations(s string) ([]Annotation, error) {
	as, ok := scanAnnotations(s)
	if !ok {
		as = nil
		if err := json.Unmarshal([]byte(s), &as); err != nil {
			return nil, fmt.Errorf("bad %s metadata: %v", MetaAnnotations, err)
		}
	}
	for i, a := range as {
		if a.Stage != AnnotationStart && a.Stage != AnnotationEnd {
			return nil, fmt.Errorf("bad %s metadata: entry %d has stage %q, want %q or %q",
				MetaAnnotations, i, a.Stage, AnnotationStart, AnnotationEnd)
		}
	}
	return as, nil
}

// scanAnnotations reads the JSON that encodeAnnotations writes, ten times
// faster than encoding/json (a full PyTorch ring buffer of 100,000 scope
// edges is read each time a trace is opened). ok is false for anything
// else (other spacing or key order, escapes), which encoding/json reads.
func scanAnnotations(s string) (as []Annotation, ok bool) {
	sc := scanner{s: s}
	if !sc.lit("[") {
		return nil, false
	}
	if sc.lit("]") {
		return nil, sc.i == len(s)
	}
	as = make([]Annotation, 0, strings.Count(s, `{"name":`))
	// Names repeat: each distinct one is copied out of s once, so the
	// annotations do not keep the whole metadata string alive.
	names := map[string]string{AnnotationStart: AnnotationStart, AnnotationEnd: AnnotationEnd}
	intern := func(x *string) {
		if v, ok := names[*x]; ok {
			*x = v
			return
		}
		v := strings.Clone(*x)
		names[v], *x = v, v
	}
	for {
		var a Annotation
		var dev int64
		if !sc.lit(`{"name":`) || !sc.str(&a.Name) || !sc.lit(`,"stage":`) || !sc.str(&a.Stage) ||
			!sc.lit(`,"device":`) || !sc.int(&dev) || !sc.lit(`,"time_us":`) || !sc.int(&a.TimeUs) || !sc.lit("}") ||
			dev != int64(int32(dev)) {
			return nil, false
		}
		a.Device = int32(dev)
		intern(&a.Name)
		intern(&a.Stage)
		as = append(as, a)
		if sc.lit("]") {
			return as, sc.i == len(s)
		}
		if !sc.lit(",") {
			return nil, false
		}
	}
}

// scanner reads s from i.
type scanner struct {
	s string
	i int
}

func (sc *scanner) lit(l string) bool {
	if strings.HasPrefix(sc.s[sc.i:], l) {
		sc.i += len(l)
		return true
	}
	return false
}

// str reads a JSON string without escapes.
func (sc *scanner) str(out *string) bool {
	if !sc.lit(`"`) {
		return false
	}
	end := strings.IndexByte(sc.s[sc.i:], '"')
	if end < 0 || strings.IndexByte(sc.s[sc.i:sc.i+end], '\\') >= 0 {
		return false
	}
	*out = sc.s[sc.i : sc.i+end]
	sc.i += end + 1
	return true
}

// int reads a JSON integer.
func (sc *scanner) int(out *int64) bool {
	j := sc.i
	if j < len(sc.s) && sc.s[j] == '-' {
		j++
	}
	for j < len(sc.s) && sc.s[j] >= '0' && sc.s[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(sc.s[sc.i:j], 10, 64)
	if err != nil {
		return false
	}
	*out, sc.i = n, j
	return true
}
