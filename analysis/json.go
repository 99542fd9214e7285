package analysis

import (
	"encoding/json"

	"github.com/tracer-dev/tracer/trace"
)

// JSON shapes. Every key is snake_case, lists are [] when empty, and a
// site's or event's stack says what it is in stack_kind. The keys of the
// first releases that were Go field names (a frame's Name, File and Line;
// a timeline bucket's FirstEvent, LastEvent, FirstTimeUs, LastTimeUs and
// its unnamed Series array) are still written beside their replacements,
// for this version only: DeprecatedJSONKeys lists them.

// DeprecatedJSONKeys are the keys written for one more version beside
// their snake_case replacements; the next version drops them.
var DeprecatedJSONKeys = []string{"Name", "File", "Line", "FirstEvent", "LastEvent", "FirstTimeUs", "LastTimeUs", "Series"}

// Stack kinds: what a stack id in a report stands for.
const (
	StackRecorded        = "recorded"         // a stack of the trace's stack table
	StackNone            = "none"             // the event had no stack (see NoStackHint)
	StackOtherSites      = "other_sites"      // the sum of the sites beyond the top N
	StackBeforeRecording = "before_recording" // blocks live before the recording began
)

// NoStackHint says why blocks may have no stack, for reports.
const NoStackHint = "PyTorch recorded no Python frame: allocations made outside Python code (autograd's backward thread, C++ extensions), or a recording with stacks off; 'tracer record --stacks all' records C++ frames too"

// StackKind names what id stands for: one of the Stack* constants.
func StackKind(id trace.StackID) string {
	switch {
	case id == OtherSites:
		return StackOtherSites
	case id == BeforeRecording:
		return StackBeforeRecording
	case id < 0:
		return StackNone
	}
	return StackRecorded
}

// frameJSON is a frame: snake_case keys, and the deprecated Go field names.
type frameJSON struct {
	Name    string `json:"name"`
	File    string `json:"file"`
	Line    int32  `json:"line"` // -1 when unknown
	OldName string `json:"Name"`
	OldFile string `json:"File"`
	OldLine int32  `json:"Line"`
}

func toFrameJSON(f trace.Frame) frameJSON {
	return frameJSON{Name: f.Name, File: f.File, Line: f.Line, OldName: f.Name, OldFile: f.File, OldLine: f.Line}
}

// MarshalJSON writes a site with its stack_kind, its frames (always a
// list) and its caller as frame objects.
func (s Site) MarshalJSON() ([]byte, error) {
	frames := make([]frameJSON, len(s.Frames))
	for i, f := range s.Frames {
		frames[i] = toFrameJSON(f)
	}
	return json.Marshal(struct {
		Stack          trace.StackID `json:"stack"`
		StackKind      string        `json:"stack_kind"`
		Frames         []frameJSON   `json:"frames"`
		Caller         frameJSON     `json:"caller"`
		BlockBytes     Bytes         `json:"block_bytes"`
		RequestedBytes Bytes         `json:"requested_bytes"`
		Count          int64         `json:"count"`
	}{s.Stack, StackKind(s.Stack), frames, toFrameJSON(s.Caller), s.BlockBytes, s.RequestedBytes, s.Count})
}

// MarshalJSON writes an OOM with its stack_kind.
func (o OOM) MarshalJSON() ([]byte, error) {
	type plain OOM // without this method
	return json.Marshal(struct {
		plain
		StackKind string `json:"stack_kind"`
	}{plain(o), StackKind(o.Stack)})
}

// MarshalJSON writes a grow with its stack_kind.
func (g Grow) MarshalJSON() ([]byte, error) {
	type plain Grow
	return json.Marshal(struct {
		plain
		StackKind string `json:"stack_kind"`
	}{plain(g), StackKind(g.Stack)})
}

// MarshalJSON writes a bucket with snake_case keys and its series by name
// ("series": {"allocated": {...}, ...}), and the deprecated keys.
func (b Bucket) MarshalJSON() ([]byte, error) {
	series := make(map[string]Span, NumSeries)
	for i, s := range b.Series {
		series[Series(i).String()] = s
	}
	return json.Marshal(struct {
		FirstEvent     int64           `json:"first_event"`
		LastEvent      int64           `json:"last_event"`
		FirstTimeUs    int64           `json:"first_time_us"`
		LastTimeUs     int64           `json:"last_time_us"`
		Series         map[string]Span `json:"series"`
		OldFirstEvent  int64           `json:"FirstEvent"`
		OldLastEvent   int64           `json:"LastEvent"`
		OldFirstTimeUs int64           `json:"FirstTimeUs"`
		OldLastTimeUs  int64           `json:"LastTimeUs"`
		OldSeries      [NumSeries]Span `json:"Series"`
	}{b.FirstEvent, b.LastEvent, b.FirstTimeUs, b.LastTimeUs, series,
		b.FirstEvent, b.LastEvent, b.FirstTimeUs, b.LastTimeUs, b.Series})
}

// MarshalJSON writes a summary with every list [] when empty.
func (s *Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	c := plain(*s)
	c.Sites = nonNil(c.Sites)
	c.Segments = nonNil(c.Segments)
	c.OOMs = nonNil(c.OOMs)
	c.Phases = nonNil(c.Phases)
	c.Timeline.Buckets = nonNil(c.Timeline.Buckets)
	c.Lifetimes.Buckets = nonNil(c.Lifetimes.Buckets)
	return json.Marshal(&c)
}

func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}
