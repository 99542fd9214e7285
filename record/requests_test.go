package record

import (
	"testing"

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
