package replay

import (
	"context"
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// emittedKeeper is an EmittedObserver that keeps every event, made from
// the Emitted it is handed (Events) or handed one by one, and counts the
// bytes the model wrote for them.
type emittedKeeper struct {
	evs   []trace.Event
	calls int // Event's
	bytes int // the Emitted's: raw events, marks, pools and extras
	free  []*Emitted
}

func (k *emittedKeeper) Event(ev *trace.Event) {
	k.calls++
	k.evs = append(k.evs, *ev)
}

func (k *emittedKeeper) Emitted(e *Emitted, more bool) *Emitted {
	if e != nil {
		k.bytes += 32*len(e.raw) + 16*len(e.marks) + 24*len(e.pools) + 112*len(e.extras)
		k.evs = e.Events(k.evs)
		// An Emitted comes back dirty, as a recycled batch's would.
		e.raw = e.raw[:cap(e.raw)]
		for i := range e.raw {
			e.raw[i] = allocator.RawEvent{Addr: 7, Size: 7, Stream: 7, BlockAction: 7}
		}
		k.free = append(k.free, e)
	}
	if !more {
		return nil
	}
	if n := len(k.free); n > 0 {
		e = k.free[n-1]
		k.free = k.free[:n-1]
		return e
	}
	return new(Emitted)
}

// TestHandoff: a replay hands an EmittedObserver the events an Observer
// gets, in Emitteds, with the same results and mismatches (the comparison
// made lazily), on every snapshot under its settings, under other
// settings, under wrong settings claimed to be the recorded ones (which
// mismatch), and on two devices; an Emitted of 5 events and 3 extras
// hands over in the middle of requests and of restores, and the source's
// batches of 3 events reuse one buffer. For one device
// the model writes no event one by one, and under 40 bytes an event
// where a trace.Event is 104: it fails if the replay does not take the
// hand-off.
func TestHandoff(t *testing.T) {
	var ins []replayInput
	exp, _ := allocator.ParseConf("expandable_segments:True")
	for _, in := range snapshotInputs(t) {
		o := in.opts
		ins = append(ins, in,
			replayInput{in.name + " expandable", in.evs, Options{Conf: exp, TotalMemory: o.TotalMemory, MemoryLimit: o.MemoryLimit}},
			replayInput{in.name + " wrong", in.evs, Options{Conf: allocator.DefaultConf(), TotalMemory: o.TotalMemory, Recorded: true, MaxMismatches: 3}})
	}
	// The second device comes after some Emitteds.
	two := genTwoDevices(50_000, 20_000)
	ins = append(ins, replayInput{"two-devices", two, Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 40}},
		replayInput{"two-devices recorded", two, Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 40, Recorded: true}})
	mismatched := 0
	for _, small := range []bool{false, true} {
		if small {
			defer func(r, x int) { emittedRaw, emittedExtras = r, x }(emittedRaw, emittedExtras)
			emittedRaw, emittedExtras = 5, 3
		}
		for _, in := range ins {
			var want []trace.Event
			r1, err := Run(context.Background(), NewSliceSource(in.evs), in.opts, ObserverFunc(func(ev *trace.Event) { want = append(want, *ev) }))
			if err != nil {
				t.Fatalf("%s: %v", in.name, err)
			}
			var k emittedKeeper
			// Batches of 3 events in one buffer, which the source
			// rewrites: a recorded event still expected at a batch's end
			// must have been copied (keepExpected).
			var src Source = NewSliceSource(in.evs)
			if small {
				src = &smallBatches{evs: in.evs, buf: make([]trace.Event, 0, 3)}
			}
			r2, err := Run(context.Background(), src, in.opts, &k)
			if err != nil {
				t.Fatalf("%s: %v", in.name, err)
			}
			if !reflect.DeepEqual(k.evs, want) {
				n := 0
				for n < min(len(k.evs), len(want)) && k.evs[n] == want[n] {
					n++
				}
				t.Fatalf("%s (small %v): %d events handed off, %d observed, first difference at %d", in.name, small, len(k.evs), len(want), n)
			}
			for i := range r1.Devices {
				a, b := r1.Devices[i], r2.Devices[i]
				a.Allocator, b.Allocator = nil, nil
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("%s (small %v): device %d's results differ:\n%+v\n%+v", in.name, small, i, a, b)
				}
				mismatched += a.NumMismatches
			}
			if len(r1.Devices) == 1 && len(want) > 100 {
				if k.calls != 0 {
					t.Errorf("%s: %d events handed one by one", in.name, k.calls)
				}
				if per := float64(k.bytes) / float64(len(want)); !small && per >= 40 {
					t.Errorf("%s: %.1f bytes written an event", in.name, per)
				}
			}
		}
	}
	if mismatched == 0 {
		t.Error("no replay mismatched: the lazy comparison is not tested")
	}
}

// crossStreamRecording is what the model records for n blocks of 512
// bytes freed while another stream uses them (record_stream), then
// completed all at once (a synchronize): n free_requested stay pending
// behind the model until the end.
func crossStreamRecording(t *testing.T, n int) []trace.Event {
	t.Helper()
	a, err := allocator.New(allocator.DefaultConf(), allocator.NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	var evs []trace.Event
	a.SetObserver(allocator.ObserverFunc(func(e *allocator.Event) {
		evs = append(evs, trace.Event{Seq: int64(len(evs)), Kind: KindOf(e.Action), Addr: e.Addr, Size: e.Size,
			Stream: e.Stream, Stack: trace.NoStack})
	}))
	addrs := make([]uint64, n)
	for i := range addrs {
		if addrs[i], err = a.Malloc(512, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, addr := range addrs {
		if err := a.RecordStream(addr, 7); err != nil {
			t.Fatal(err)
		}
		if err := a.Free(addr); err != nil {
			t.Fatal(err)
		}
	}
	for _, addr := range addrs {
		a.MarkEventsDone(addr)
	}
	a.ProcessEvents()
	return evs
}

// TestWork_keepExpected: a recording with 20,000 cross-stream frees
// pending at once, replayed as recorded from batches of 64 events in one
// reused buffer: each recorded event still expected at a batch's end is
// copied once (at most one copy an event in all), not once a batch (about
// 20,000 · 600 / 2 copies), and the replay matches the recording.
func TestWork_keepExpected(t *testing.T) {
	const n = 20000
	evs := crossStreamRecording(t, n)
	expectCopies.Store(0)
	src := &smallBatches{evs: evs, buf: make([]trace.Event, 0, 64)}
	res, err := Run(context.Background(), src, Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 40, Recorded: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Devices[0].NumMismatches; m != 0 {
		t.Fatalf("%d mismatches: %v", m, res.Devices[0].Mismatches)
	}
	if c := expectCopies.Load(); c > int64(len(evs)) {
		t.Errorf("%d recorded events copied for %d events in batches of 64, want at most %d", c, len(evs), len(evs))
	} else if c == 0 {
		t.Error("no recorded event was copied: the recording kept none pending, and the test tests nothing")
	}
}
