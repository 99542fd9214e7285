package record

import (
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/trace"
)

// withRows, called chunk by chunk as readChunks calls it, yields the
// device's events with each empty_cache row before the release it names,
// and every Seq the index in that output: for rows at a chunk's start, its
// end, inside it and side by side, with chunks read into their buffer (a
// spilled snapshot) and chunks that are views of the events (in memory).
func TestWithRows(t *testing.T) {
	const n, chunk = 40, 8
	events := make([]trace.Event, n)
	for i := range events {
		events[i] = trace.Event{Seq: int64(i), Kind: trace.KindAlloc, Addr: uint64(i)}
	}
	var rows []trace.Event
	for _, at := range []int64{0, 7, 8, 8, 13, 39} {
		rows = append(rows, trace.Event{Seq: at, Kind: trace.KindEmptyCache, Size: at})
	}
	var want []trace.Event
	r := 0
	for i := range events {
		for r < len(rows) && rows[r].Seq == int64(i) {
			want = append(want, rows[r])
			r++
		}
		want = append(want, events[i])
	}
	for i := range want {
		want[i].Seq = int64(i)
	}
	for _, view := range []bool{false, true} {
		src := append([]trace.Event(nil), events...)
		var got []trace.Event
		before := 0
		for lo := 0; lo < n; lo += chunk {
			buf := make([]trace.Event, chunk)
			evs := src[lo : lo+chunk]
			if !view {
				copy(buf, evs)
				evs = buf
			}
			got = append(got, withRows(evs, buf, int64(lo), rows, before)...)
			for before < len(rows) && rows[before].Seq < int64(lo+chunk) {
				before++
			}
		}
		if len(got) != len(want) {
			t.Fatalf("view %v: %d events, want %d", view, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("view %v: event %d is %+v, want %+v", view, i, got[i], want[i])
			}
		}
		if view {
			for i := range src {
				if src[i] != events[i] {
					t.Fatalf("the view's event %d changed: %+v", i, src[i])
				}
			}
		}
	}
}

// TestFindEmptyCaches_privatePool: a capture on stream 7 makes segment b
// although the default segment a had room (a private pool), and keeps its
// block; on stream 0 a later malloc at the memory limit reclaims the cached
// segment c. Only a model that infers b's pool holds b and so sees the
// reclaim: one that serves the capture from a takes c's release for an
// empty_cache() call the program did not make.
func TestFindEmptyCaches_privatePool(t *testing.T) {
	const mib = 1 << 20
	const a, b, c, d = 0x10000000, 0x20000000, 0x30000000, 0x40000000
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: a, Size: 20 * mib, Stream: 7},
		{Kind: trace.KindAlloc, Addr: a, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindSegmentAlloc, Addr: b, Size: 20 * mib, Stream: 7},
		{Kind: trace.KindAlloc, Addr: b, Size: 4 * mib, Stream: 7},
		{Kind: trace.KindSegmentAlloc, Addr: c, Size: 18 * mib},
		{Kind: trace.KindAlloc, Addr: c, Size: 18 * mib},
		{Kind: trace.KindFreeRequested, Addr: c, Size: 18 * mib},
		{Kind: trace.KindFreeCompleted, Addr: c, Size: 18 * mib},
		{Kind: trace.KindSegmentFree, Addr: c, Size: 18 * mib},
		{Kind: trace.KindSegmentAlloc, Addr: d, Size: 20 * mib},
		{Kind: trace.KindAlloc, Addr: d, Size: 20 * mib},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	dev := &torchsnap.Device{Events: evs}
	rows, _, err := findEmptyCaches(allocator.DefaultConf(), inference{pools: true}, 60*mib, 0, nil, dev, 8, privateSegments(dev), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Errorf("found %d empty_cache calls (the first before seq %d), want none: the malloc reclaimed c", len(rows), rows[0].Seq)
	}
	for i := range evs {
		if !evs[i].Pool.IsDefault() {
			t.Errorf("event %d got pool %v: the inference wrote into the snapshot's events", i, evs[i].Pool)
		}
	}
}
