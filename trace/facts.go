package trace

import "sort"

// Facts are what a single pass over a trace can say without modelling the
// allocator: how many events of each action, which devices and streams, the
// time span. `tracer info` prints them.
type Facts struct {
	Events        int64
	Actions       map[string]int64 // by PyTorch action name
	Devices       []int32          // sorted
	Streams       []uint64         // sorted
	FirstUs       int64            // time of the first event with a time; 0 if none
	LastUs        int64
	Reconstructed int64 // events synthesised to restore pre-trace state
	WithStack     int64 // events carrying a stack
	Unknown       int64 // events with an action this version does not know
	Truncated     bool  // the stream ended without its end-of-stream marker (set by the caller)

	devices map[int32]bool
	streams map[uint64]bool
}

// Add folds one event into f.
func (f *Facts) Add(ev *Event) {
	if f.Actions == nil {
		f.Actions = make(map[string]int64)
		f.devices = make(map[int32]bool)
		f.streams = make(map[uint64]bool)
	}
	f.Events++
	if !ev.Kind.Valid() {
		f.Unknown++
		return
	}
	f.Actions[ev.Kind.String()]++
	if !f.devices[ev.Device] {
		f.devices[ev.Device] = true
		f.Devices = append(f.Devices, ev.Device)
		sort.Slice(f.Devices, func(i, j int) bool { return f.Devices[i] < f.Devices[j] })
	}
	if ev.Kind != KindSnapshot { // snapshot markers carry stream 0, not a real stream
		if !f.streams[ev.Stream] {
			f.streams[ev.Stream] = true
			f.Streams = append(f.Streams, ev.Stream)
			sort.Slice(f.Streams, func(i, j int) bool { return f.Streams[i] < f.Streams[j] })
		}
	}
	if ev.TimeUs != 0 {
		if f.FirstUs == 0 || ev.TimeUs < f.FirstUs {
			f.FirstUs = ev.TimeUs
		}
		if ev.TimeUs > f.LastUs {
			f.LastUs = ev.TimeUs
		}
	}
	if ev.Flags&FlagReconstructed != 0 {
		f.Reconstructed++
	}
	if ev.Stack != NoStack {
		f.WithStack++
	}
}

// SpanUs is the time between the first and last timed events, in µs.
func (f *Facts) SpanUs() int64 { return f.LastUs - f.FirstUs }
