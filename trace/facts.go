package trace

import "slices"

// Facts are what a single pass over a trace can say without modelling the
// allocator: how many events of each action, which devices and streams, the
// time span. `tracer info` prints them.
//
// Add runs once per event on every pass (info, analyze, replay), so it keeps
// counts in an array by Kind and remembers the last device and stream seen:
// the common event touches no map.
type Facts struct {
	Events        int64
	Devices       []int32  // sorted
	Streams       []uint64 // sorted
	FirstUs       int64    // time of the first event with a time; 0 if none
	LastUs        int64
	Reconstructed int64 // events synthesised to restore pre-trace state
	WithStack     int64 // events carrying a stack
	Unknown       int64 // events with an action this version does not know
	Truncated     bool  // the stream ended without its end-of-stream marker (set by the caller)

	kinds      [numKinds]int64
	reconKinds [numKinds]int64 // of the reconstructed events
	lastDevice int32
	lastStream uint64
	seenDevice bool
	seenStream bool
}

// Add folds one event into f.
func (f *Facts) Add(ev *Event) {
	f.Events++
	if !ev.Kind.Valid() {
		f.Unknown++
		return
	}
	f.kinds[ev.Kind]++
	if !f.seenDevice || ev.Device != f.lastDevice {
		f.seenDevice, f.lastDevice = true, ev.Device
		if i, found := slices.BinarySearch(f.Devices, ev.Device); !found {
			f.Devices = slices.Insert(f.Devices, i, ev.Device)
		}
	}
	// Snapshot markers and empty_cache calls carry stream 0, not a real stream.
	if ev.Kind != KindSnapshot && ev.Kind != KindEmptyCache && (!f.seenStream || ev.Stream != f.lastStream) {
		f.seenStream, f.lastStream = true, ev.Stream
		if i, found := slices.BinarySearch(f.Streams, ev.Stream); !found {
			f.Streams = slices.Insert(f.Streams, i, ev.Stream)
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
		f.reconKinds[ev.Kind]++
	}
	if ev.Stack != NoStack {
		f.WithStack++
	}
}

// Count returns the number of events of kind k.
func (f *Facts) Count(k Kind) int64 {
	if !k.Valid() {
		return 0
	}
	return f.kinds[k]
}

// Actions returns the event counts by PyTorch action name, leaving out
// actions that never occur.
func (f *Facts) Actions() map[string]int64 {
	m := make(map[string]int64)
	for k := KindAlloc; k < numKinds; k++ {
		if n := f.kinds[k]; n > 0 {
			m[k.String()] = n
		}
	}
	return m
}

// RecordedActions returns Actions less the reconstructed events: what the
// trace recorded, without the state tracer synthesised at its start.
func (f *Facts) RecordedActions() map[string]int64 {
	m := make(map[string]int64)
	for k := KindAlloc; k < numKinds; k++ {
		if n := f.kinds[k] - f.reconKinds[k]; n > 0 {
			m[k.String()] = n
		}
	}
	return m
}

// ReconstructedActions returns the counts by action name of the
// reconstructed events alone.
func (f *Facts) ReconstructedActions() map[string]int64 {
	m := make(map[string]int64)
	for k := KindAlloc; k < numKinds; k++ {
		if n := f.reconKinds[k]; n > 0 {
			m[k.String()] = n
		}
	}
	return m
}

// SpanUs is the time between the first and last timed events, in µs.
func (f *Facts) SpanUs() int64 { return f.LastUs - f.FirstUs }
