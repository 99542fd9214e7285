package allocator

import (
	"fmt"
	"testing"
)

// runSink collects what an EventSink is handed: the events with their runs'
// pools, and checks the contract on every call (n within the buffer given,
// segment and oom events last in their run).
type runSink struct {
	t       *testing.T
	buf     []RawEvent // the buffer last given
	size    int        // the length of the buffers to give, cycling up to 7
	fixed   int        // or this length, when not 0
	events  []Event
	calls   int
	pending func() int
}

func newRunSink(t *testing.T, fixed int) *runSink {
	return &runSink{t: t, buf: make([]RawEvent, max(fixed, 3)), fixed: fixed}
}

func (s *runSink) EventsWritten(n int, pool PoolID) []RawEvent {
	s.calls++
	if n <= 0 || n > len(s.buf) {
		s.t.Fatalf("EventsWritten(%d) with a buffer of %d", n, len(s.buf))
	}
	if s.pending != nil && s.pending() != 0 {
		s.t.Fatalf("PendingEvents = %d during EventsWritten", s.pending())
	}
	for i, e := range s.buf[:n] {
		act := e.Action()
		if act >= ActSegmentAlloc && act <= ActOOM && i != n-1 {
			s.t.Fatalf("a %v event is not the last of its run (%d of %d)", act, i, n)
		}
		ev := Event{Action: act, Addr: e.Addr, Size: e.Size, Stream: e.Stream, Pool: pool, BlockSize: e.BlockSize()}
		if act == ActFreeSync { // the two events it stands for
			ev.Action = ActFreeRequested
			s.events = append(s.events, ev)
			ev.Action = ActFreeCompleted
		}
		s.events = append(s.events, ev)
	}
	s.size = s.size%7 + 1
	if s.fixed > 0 {
		s.size = s.fixed
	}
	// A fresh buffer each time, dirty, so a stale write or a short count
	// shows up as a wrong event.
	s.buf = make([]RawEvent, s.size)
	for i := range s.buf {
		s.buf[i] = RawEvent{Addr: 0xdead, BlockAction: PackBlockAction(99, 99)}
	}
	return s.buf
}

// An EventSink sees exactly the events an Observer sees on the same calls,
// each with its pool, over segments, private pools, a cache release and an
// oom; its runs follow the contract (runSink checks it).
func TestEventSinkMatchesObserver(t *testing.T) {
	for _, cs := range []string{"", "expandable_segments:True"} {
		t.Run(fmt.Sprintf("conf=%q", cs), func(t *testing.T) {
			conf, err := ParseConf(cs)
			if err != nil {
				t.Fatal(err)
			}
			var observed []Event
			obs, err := New(conf, NewSimDevice(2*gib))
			if err != nil {
				t.Fatal(err)
			}
			obs.SetObserver(ObserverFunc(func(e *Event) { observed = append(observed, *e) }))
			sunk, err := New(conf, NewSimDevice(2*gib))
			if err != nil {
				t.Fatal(err)
			}
			s := newRunSink(t, 0)
			s.pending = sunk.PendingEvents
			sunk.SetEventSink(s, s.buf)

			private := PoolID{A: 1, B: 2}
			for _, a := range []*Allocator{obs, sunk} {
				var addrs []uint64
				for i := range 300 {
					if i == 100 {
						a.BeginAllocateToPool(private, func(uint64) bool { return true })
					}
					if i == 140 {
						a.EndAllocateToPool(private)
					}
					addr, err := a.Malloc(int64(i%37+1)*int64(1<<(i%5*4)), uint64(i%2)<<8)
					if err != nil {
						t.Fatal(err)
					}
					addrs = append(addrs, addr)
					if i%3 == 2 {
						if err := a.Free(addrs[i/2]); err != nil {
							t.Fatal(err)
						}
						addrs[i/2] = 0
					}
				}
				for _, addr := range addrs {
					if addr != 0 {
						if err := a.Free(addr); err != nil {
							t.Fatal(err)
						}
					}
				}
				a.ReleasePool(private)
				if err := a.EmptyCache(); err != nil {
					t.Fatal(err)
				}
				if _, err := a.Malloc(4*gib, 0); !IsOOM(err) {
					t.Fatalf("a 4 GiB malloc on 2 GiB: %v, want an oom", err)
				}
			}
			if p := sunk.PendingEvents(); p != 0 {
				t.Errorf("PendingEvents = %d after an oom, want 0 (an oom ends its run)", p)
			}
			sunk.SetEventSink(nil, nil)
			if len(s.events) != len(observed) {
				t.Fatalf("the sink got %d events, the observer %d", len(s.events), len(observed))
			}
			pools := 0
			for i := range observed {
				if s.events[i] != observed[i] {
					t.Fatalf("event %d: the sink got %+v, the observer %+v", i, s.events[i], observed[i])
				}
				if observed[i].Pool == private {
					pools++
				}
			}
			if pools == 0 {
				t.Error("no event in the private pool: the test does not cover pool changes")
			}
			if s.calls < len(observed)/7 {
				t.Errorf("%d calls for %d events in buffers of at most 7", s.calls, len(observed))
			}
		})
	}
}

// FlushEvents hands over what is written, SetEventBuffer redirects the next
// events, and setting an Observer first hands the sink its events.
func TestEventSinkFlush(t *testing.T) {
	a, err := New(DefaultConf(), NewSimDevice(gib))
	if err != nil {
		t.Fatal(err)
	}
	s := newRunSink(t, 64)
	a.SetEventSink(s, s.buf)
	if _, err := a.Malloc(512, 0); err != nil { // segment_alloc (flushed), alloc
		t.Fatal(err)
	}
	if got := a.PendingEvents(); got != 1 {
		t.Fatalf("PendingEvents = %d after segment_alloc, alloc; want 1", got)
	}
	a.FlushEvents()
	if a.PendingEvents() != 0 || len(s.events) != 2 || s.events[1].Action != ActAlloc {
		t.Fatalf("after FlushEvents: %d pending, events %+v", a.PendingEvents(), s.events)
	}
	mine := make([]RawEvent, 4)
	a.SetEventBuffer(mine)
	addr, err := a.Malloc(512, 0)
	if err != nil {
		t.Fatal(err)
	}
	if mine[0].Action() != ActAlloc || mine[0].Addr != addr || a.PendingEvents() != 1 {
		t.Fatalf("the event went elsewhere than SetEventBuffer's buffer: %+v", mine[0])
	}
	s.buf = mine
	var after []Event
	a.SetObserver(ObserverFunc(func(e *Event) { after = append(after, *e) }))
	if len(s.events) != 3 {
		t.Fatalf("setting an observer handed the sink %d events in all, want 3", len(s.events))
	}
	if err := a.Free(addr); err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || len(s.events) != 3 {
		t.Fatalf("after SetObserver: observer %d events, sink %d; want 2 and 3", len(after), len(s.events))
	}
}

// The small and large pools of one PoolID are one pool to the sink: events
// alternating between them, on a warm cache (no segment events), stay in one
// run until the buffer is full.
func TestEventSinkRuns(t *testing.T) {
	a, err := New(DefaultConf(), NewSimDevice(gib))
	if err != nil {
		t.Fatal(err)
	}
	warm := func() {
		for _, size := range []int64{512, 2*mib + 1} {
			addr, err := a.Malloc(size, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Free(addr); err != nil {
				t.Fatal(err)
			}
		}
	}
	warm() // the segments, unobserved
	s := newRunSink(t, 1000)
	a.SetEventSink(s, s.buf)
	for range 25 {
		warm()
	}
	if s.calls != 0 || a.PendingEvents() != 100 {
		t.Fatalf("100 events (alloc, and free_requested + free_completed as one) in the default pool's small and large pools: %d runs handed over, %d pending; want 0 and 100", s.calls, a.PendingEvents())
	}
}

// A synchronous free reaches a sink as one ActFreeSync event with the
// block's fields; a free that waits for another stream as free_requested,
// then free_completed once the stream's work is done.
func TestEventSinkFreeSync(t *testing.T) {
	a, err := New(DefaultConf(), NewSimDevice(gib))
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Malloc(1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	q, err := a.Malloc(3000, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]RawEvent, 8)
	s := newRunSink(t, 8)
	a.SetEventSink(s, buf)
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStream(q, 7); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(q); err != nil {
		t.Fatal(err)
	}
	if err := a.CompleteFree(q); err != nil {
		t.Fatal(err)
	}
	if n := a.PendingEvents(); n != 3 {
		t.Fatalf("%d events written, want 3 (free_sync, free_requested, free_completed)", n)
	}
	want := []RawEvent{
		{Addr: p, Size: 1000, BlockAction: PackBlockAction(1024, ActFreeSync)},
		{Addr: q, Size: 3000, BlockAction: PackBlockAction(3072, ActFreeRequested)},
		{Addr: q, Size: 3000, BlockAction: PackBlockAction(3072, ActFreeCompleted)},
	}
	for i, w := range want {
		if buf[i] != w {
			t.Errorf("event %d: %+v (%v, block %d), want %+v (%v)", i, buf[i], buf[i].Action(), buf[i].BlockSize(), w, w.Action())
		}
	}
}

// Events of blocks in a private pool carry its id even when no event of the
// pool came before: here the pool arrives by Restore, with the sink already
// set, and the first event in it is a free.
func TestEventSinkRestoredPool(t *testing.T) {
	private := PoolID{A: 3, B: 4}
	src, err := New(DefaultConf(), NewSimDevice(gib))
	if err != nil {
		t.Fatal(err)
	}
	other, err := src.Malloc(1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	src.BeginAllocateToPool(private, nil)
	addr, err := src.Malloc(1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	src.EndAllocateToPool(private)

	a, err := New(DefaultConf(), NewSimDevice(gib))
	if err != nil {
		t.Fatal(err)
	}
	s := newRunSink(t, 64)
	a.SetEventSink(s, s.buf)
	if err := a.Restore(src.Segments()); err != nil {
		t.Fatal(err)
	}
	for _, x := range []uint64{addr, other} {
		if err := a.Free(x); err != nil {
			t.Fatal(err)
		}
	}
	a.FlushEvents()
	var got []string
	for _, e := range s.events {
		got = append(got, fmt.Sprintf("%v@%#x:%v", e.Action, e.Addr, e.Pool))
	}
	want := []string{
		fmt.Sprintf("free_requested@%#x:%v", addr, private), fmt.Sprintf("free_completed@%#x:%v", addr, private),
		fmt.Sprintf("free_requested@%#x:{0 0}", other), fmt.Sprintf("free_completed@%#x:{0 0}", other),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events:\n%v\nwant\n%v", got, want)
	}
}
