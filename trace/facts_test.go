package trace_test

import (
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

func TestFacts(t *testing.T) {
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Device: 1, Stream: 9, TimeUs: 100, Flags: trace.FlagReconstructed, Stack: trace.NoStack},
		{Kind: trace.KindAlloc, Device: 1, Stream: 9, TimeUs: 150, Stack: 0},
		{Kind: trace.KindAlloc, Device: 0, Stream: 0, TimeUs: 120, Stack: trace.NoStack},
		{Kind: trace.KindSnapshot, Device: 0, Stream: 0, TimeUs: 400, Stack: trace.NoStack},
		{Kind: trace.KindInvalid, Stack: trace.NoStack},
	}
	var f trace.Facts
	for i := range evs {
		f.Add(&evs[i])
	}
	if f.Events != 5 || f.Unknown != 1 || f.Reconstructed != 1 || f.WithStack != 1 {
		t.Errorf("counts: %+v", f)
	}
	if a := f.Actions(); a["alloc"] != 2 || a["segment_alloc"] != 1 || a["snapshot"] != 1 || len(a) != 3 {
		t.Errorf("actions: %v", a)
	}
	if f.Count(trace.KindAlloc) != 2 || f.Count(trace.KindInvalid) != 0 {
		t.Errorf("Count: alloc %d, invalid %d", f.Count(trace.KindAlloc), f.Count(trace.KindInvalid))
	}
	if len(f.Devices) != 2 || f.Devices[0] != 0 || f.Devices[1] != 1 {
		t.Errorf("devices: %v", f.Devices)
	}
	if len(f.Streams) != 2 || f.Streams[0] != 0 || f.Streams[1] != 9 {
		t.Errorf("streams: %v", f.Streams)
	}
	if f.FirstUs != 100 || f.LastUs != 400 || f.SpanUs() != 300 {
		t.Errorf("time span: %d..%d", f.FirstUs, f.LastUs)
	}
}
