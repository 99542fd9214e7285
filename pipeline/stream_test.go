package pipeline

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestReadAheadBatches checks that readAhead serves the same events through
// NextBatch as through Next, also when the two are mixed.
func TestReadAheadBatches(t *testing.T) {
	in, err := Open("") // the built-in sample
	if err != nil {
		t.Fatal(err)
	}
	read := func(mix func(ra *readAhead, k int) []trace.Event) []trace.Event {
		return readAll(t, in, false, mix)
	}
	next := func(ra *readAhead, _ int) []trace.Event {
		if !ra.Next() {
			return nil
		}
		return []trace.Event{*ra.Event()}
	}
	want := read(next)
	if len(want) < 1000 {
		t.Fatalf("the sample has %d events", len(want))
	}
	for name, mix := range map[string]func(ra *readAhead, k int) []trace.Event{
		"batches": func(ra *readAhead, _ int) []trace.Event { return ra.NextBatch() },
		"mixed": func(ra *readAhead, k int) []trace.Event {
			if k%3 == 2 {
				return ra.NextBatch()
			}
			return next(ra, k)
		},
	} {
		got := read(mix)
		if len(got) != len(want) {
			t.Fatalf("%s: %d events, want %d", name, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: event %d: %+v, want %+v", name, i, got[i], want[i])
			}
		}
	}
}

// TestAnalyzeBehindSlots: the analysis stage takes the events written in
// the slots it lends (replay.SlotObserver) and copies any other, in order,
// across its batches.
func TestAnalyzeBehindSlots(t *testing.T) {
	var seen []int64
	f := newFanout(Options{Observe: func(ev *trace.Event) { seen = append(seen, ev.Seq) }})
	in, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	rd, err := in.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var facts trace.Facts
	src := startReadAhead(context.Background(), rd, &facts, false, false, false, 1, 0)
	defer src.close()
	a := startAnalyzeBehind(f, src.tap, false, false)
	const n = 3*batchRows + 5
	var other trace.Event
	for i := range int64(n) {
		ev := &other
		if i%3 != 0 {
			ev = a.Slot()
		}
		*ev = trace.Event{Seq: i, Kind: trace.KindAlloc, Addr: uint64(i+1) << 9, Size: 512, BlockSize: 512, Stack: trace.NoStack}
		a.Event(ev)
	}
	a.close()
	if len(seen) != n {
		t.Fatalf("the fanout saw %d events, want %d", len(seen), n)
	}
	for i, s := range seen {
		if s != int64(i) {
			t.Fatalf("event %d has seq %d", i, s)
		}
	}
}

// TestReadAheadTaps: each tap of a readAhead serves every event, in order,
// read once for all; a tap that leaves early, as a failed replay's does,
// holds back neither the reader nor the other taps.
func TestReadAheadTaps(t *testing.T) {
	// More batches than the taps hold in flight, so that a tap that left
	// would block the reader if it still waited for it.
	path := filepath.Join(t.TempDir(), "allocs.arrows")
	w, err := trace.Create(path, trace.Meta{}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(4 * inFlight * batchRows) {
		ev := trace.Event{Seq: i, Kind: trace.KindAlloc, Addr: uint64(i+1) << 20, Size: 512, BlockSize: 512, Stack: trace.NoStack}
		if err := w.Write(&ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	read := func(taps int, leave bool) [][]trace.Event {
		rd, err := in.Reader()
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		var facts trace.Facts
		ra := startReadAhead(context.Background(), rd, &facts, false, true, false, taps, 0)
		defer ra.close()
		out := make([][]trace.Event, taps)
		each(taps, func(i int) {
			tp := ra.taps[i]
			if leave && i == 0 {
				tp.NextBatch()
				tp.leave()
				return
			}
			for evs := tp.NextBatch(); len(evs) > 0; evs = tp.NextBatch() {
				out[i] = append(out[i], evs...)
			}
		})
		if err := ra.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := read(1, false)[0]
	if len(want) != 4*inFlight*batchRows || want[len(want)-1].Ref == 0 {
		t.Fatalf("%d events read, the last numbered %d", len(want), want[len(want)-1].Ref)
	}
	for _, leave := range []bool{false, true} {
		got := read(3, leave)
		for i, evs := range got {
			if leave && i == 0 {
				continue
			}
			if len(evs) != len(want) {
				t.Fatalf("leave %v: tap %d served %d events, want %d", leave, i, len(evs), len(want))
			}
			for k := range evs {
				if evs[k] != want[k] {
					t.Fatalf("leave %v: tap %d, event %d: %+v, want %+v", leave, i, k, evs[k], want[k])
				}
			}
		}
	}
}

// TestReadAheadNumberedParts checks the numbering stage on one core and on
// 16, where the reader hands the batches to the numbering's parts
// (replay.PartNumbers): the same events, each free numbered as the alloc
// live at its address, and in parts numbers other than one part's.
func TestReadAheadNumberedParts(t *testing.T) {
	in, err := Open("") // the built-in sample
	if err != nil {
		t.Fatal(err)
	}
	read := func(procs int) []trace.Event {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		return readAll(t, in, true, func(ra *readAhead, _ int) []trace.Event { return ra.NextBatch() })
	}
	one, parts := read(1), read(16)
	if len(one) != len(parts) {
		t.Fatalf("%d events in parts, %d in one", len(parts), len(one))
	}
	live := map[uint64]int32{}
	differ, frees := 0, 0
	for i, ev := range parts {
		if ev.Ref != one[i].Ref {
			differ++
		}
		ev.Ref = one[i].Ref
		if ev != one[i] {
			t.Fatalf("event %d differs: %+v, in one part %+v", i, ev, one[i])
		}
		ev = parts[i]
		switch ev.Kind {
		case trace.KindAlloc:
			live[ev.Addr] = ev.Ref
		case trace.KindFreeRequested, trace.KindFreeCompleted:
			if n, ok := live[ev.Addr]; ok {
				frees++
				if ev.Ref != n {
					t.Fatalf("event %d: %s at %#x numbered %d, its alloc %d", i, ev.Kind, ev.Addr, ev.Ref, n)
				}
			}
			if ev.Kind == trace.KindFreeCompleted {
				delete(live, ev.Addr)
			}
		}
	}
	if frees == 0 || differ == 0 {
		t.Fatalf("%d frees checked, %d events numbered otherwise than in one part", frees, differ)
	}
}

// readAll reads in's events through a readAhead (numbering them if
// number), taking them with mix (its k-th call) until it returns none.
func readAll(t *testing.T, in *Input, number bool, mix func(ra *readAhead, k int) []trace.Event) []trace.Event {
	t.Helper()
	rd, err := in.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var facts trace.Facts
	ra := startReadAhead(context.Background(), rd, &facts, false, number, false, 1, 0)
	defer ra.close()
	var out []trace.Event
	for k := 0; ; k++ {
		evs := mix(ra, k)
		if len(evs) == 0 {
			break
		}
		out = append(out, evs...)
	}
	if err := ra.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEmittedBatch: the batch whose replay.Emitted the model fills is
// made with no events of its own when the pool has none: the model's
// thread makes 48 KiB of RawEvents and marks there, not the 208 KiB of a
// batch's trace.Events, which the numbering's goroutine makes as it fills
// them.
func TestEmittedBatch(t *testing.T) {
	a := &analyzeBehind{pool: newBatchPool(behindRows)}
	if e := a.Emitted(nil, true); e == nil || a.filling == nil {
		t.Fatal("no Emitted to fill")
	}
	if n := cap(a.filling.evs); n != 0 {
		t.Errorf("the model's thread made a batch of %d events", n)
	}
	a.pool.put(&batch{evs: make([]trace.Event, 0, behindRows)})
	a.filling = nil
	if a.Emitted(nil, true); cap(a.filling.evs) != behindRows || a.filling.emitted == nil {
		t.Errorf("the pool's batch was not taken (%d events), or has no Emitted", cap(a.filling.evs))
	}
}
