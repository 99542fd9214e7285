package record

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// feeder hands events to a recorder as the allocator does
// (allocator.EventSink): written into the buffer the recorder gave, a
// free_requested followed at once by its free_completed as one event
// (ActFreeSync), a run handed over when the buffer is full, after a segment
// or oom event, before an event in another pool, and when flushed.
type feeder struct {
	r    *recorder
	buf  []allocator.RawEvent
	n    int
	pool allocator.PoolID
	// held is a free_requested not yet written: the next event may be its
	// free_completed.
	held    allocator.Event
	holding bool
}

func newFeeder(r *recorder) *feeder { return &feeder{r: r, buf: r.buffer()} }

func (f *feeder) event(e *allocator.Event) {
	if f.holding {
		f.holding = false
		h := f.held
		if e.Action == allocator.ActFreeCompleted && e.Addr == h.Addr && e.Pool == h.Pool {
			h.Action = allocator.ActFreeSync
			f.put(&h)
			return
		}
		f.put(&h)
	}
	if e.Action == allocator.ActFreeRequested {
		f.held, f.holding = *e, true
		return
	}
	f.put(e)
}

func (f *feeder) put(e *allocator.Event) {
	if e.Pool != f.pool {
		f.flushWritten()
		f.pool = e.Pool
	}
	f.buf[f.n] = allocator.RawEvent{Addr: e.Addr, Size: e.Size, Stream: e.Stream, BlockAction: allocator.PackBlockAction(e.BlockSize, e.Action)}
	f.n++
	if f.n == len(f.buf) || e.Action >= allocator.ActSegmentAlloc && e.Action <= allocator.ActOOM {
		f.flushWritten()
	}
}

// flush hands over every event so far, a held one included.
func (f *feeder) flush() {
	if f.holding {
		f.holding = false
		f.put(&f.held)
	}
	f.flushWritten()
}

func (f *feeder) flushWritten() {
	if f.n > 0 {
		n := f.n
		f.n = 0
		f.buf = f.r.EventsWritten(n, f.pool)
	}
}

// BenchmarkSinkHotPath measures the recorder's part of the hot path: events
// written into its chunks as the allocator writes them (by the feeder, whose
// own cost is included), against an Observer that only counts. In "record" the encoder lays the events out and writes
// them to a sink, on a goroutine of its own (on a busy machine, it may set
// the pace); in "store" the chunks come straight back unencoded, which
// leaves what the allocator's thread pays.
func BenchmarkSinkHotPath(b *testing.B) {
	evs := []allocator.Event{
		{Action: allocator.ActAlloc, Addr: 1 << 40, Size: 516, BlockSize: 1024},
		{Action: allocator.ActFreeRequested, Addr: 1 << 40, Size: 516, BlockSize: 1024},
		{Action: allocator.ActFreeCompleted, Addr: 1 << 40, Size: 516, BlockSize: 1024},
	}
	b.Run("count", func(b *testing.B) {
		var n int64
		var o allocator.Observer = allocator.ObserverFunc(func(*allocator.Event) { n++ })
		for i := 0; i < b.N; i++ {
			o.AllocatorEvent(&evs[i%3])
		}
	})
	b.Run("record", func(b *testing.B) {
		w := trace.NewWriter(&copySink{}, trace.Meta{}, trace.WriterOptions{})
		r := newRecorder(w, newTestAllocator(b), 0, 0, 0)
		f := newFeeder(r)
		for i := 0; i < b.N; i++ {
			f.event(&evs[i%3])
		}
		f.flush()
		r.finish()
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("store", func(b *testing.B) {
		r := &recorder{a: newTestAllocator(b), stack: trace.NoStack, t0: time.Now()}
		e := &encoder{full: make(chan *chunk, ringChunks), freed: make(chan struct{}, 1), flushReq: &r.flushReq}
		go func() {
			for c := range e.full {
				e.put(c)
			}
		}()
		r.enc = e
		r.cur = e.chunk()
		r.ev, r.stop = r.cur.ev, 1
		f := newFeeder(r)
		for i := 0; i < b.N; i++ {
			f.event(&evs[i%3])
		}
		close(e.full)
	})
}

// newTestAllocator is an allocator for a recorder fed by a feeder: it
// writes no event itself, so it has none pending.
func newTestAllocator(tb testing.TB) *allocator.Allocator {
	a, err := allocator.New(allocator.DefaultConf(), allocator.NewSimDevice(1<<30))
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// Events between clock reads get times between them: spread at the pace of
// the previous window, and early in a window that ends after a long call.
func TestStampTimes(t *testing.T) {
	e := &encoder{lastRate: -1}
	// Steady: 100 ns an event, reads at 3 and 7.
	times := make([]int64, 8)
	e.stampTimes(times, []mark{{3, 400}, {7, 800}}, 0)
	if want := []int64{100, 200, 300, 400, 500, 600, 700, 800}; fmt.Sprint(times) != fmt.Sprint(want) {
		t.Errorf("steady: %v, want %v", times, want)
	}
	// A device call before event 3 (a segment event, read): the events
	// before it keep the pace of 100 ns; the tail is bounded by end.
	times = make([]int64, 5)
	e.stampTimes(times, []mark{{3, 50_000}}, 50_150)
	if want := []int64{900, 1000, 1100, 50_000, 50_075}; fmt.Sprint(times) != fmt.Sprint(want) {
		t.Errorf("after a call: %v, want %v", times, want)
	}
	for i := 1; i < len(times); i++ {
		if times[i] < times[i-1] {
			t.Errorf("times run backwards: %v", times)
		}
	}
}

// Stacks noted as changes reach every event they cover, and pools every
// event, across chunks and batches; NVML readings reach events at most
// maxClockEvery events late (they are read at clock reads); times are real and
// never run backwards.
//
// Batches of 1 and 999 rows split synchronous frees (two rows from one
// chunk event) between batches.
func TestRecorderMarks(t *testing.T) {
	for _, batch := range []int{1000, 999, 1} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) { testRecorderMarks(t, batch) })
	}
}

func testRecorderMarks(t *testing.T, batch int) {
	var buf bytes.Buffer
	w := trace.NewWriter(&buf, trace.Meta{}, trace.WriterOptions{})
	s1 := w.AddStack(trace.Stack{{Name: "one"}})
	s2 := w.AddStack(trace.Stack{{Name: "two"}})
	before := time.Now().UnixMicro()
	r := newRecorder(w, newTestAllocator(t), 2, batch, 0)
	r.stacks = []trace.StackID{s1, s2}
	f := newFeeder(r)
	var used fakeReading
	r.used = &used
	const n = 3*chunkEvents + 5
	want := make([]trace.Event, n)
	for i := 0; i < n; i++ {
		if i%700 == 0 {
			f.flush() // as the allocator's events are, by PendingEvents, when the statement changes
			r.setStmt(&stmt{id: (i / 700) % 2})
		}
		if i%900 == 0 {
			used.Store(int64(i))
		}
		// A free_completed is of the block the free_requested before it
		// named: the feeder writes the pair as one event (ActFreeSync),
		// which the encoder makes two rows again.
		act, j := allocator.Action(1+i%8), i
		if act == allocator.ActFreeCompleted {
			j = i - 1
		}
		ev := allocator.Event{Action: act, Addr: uint64(j), Size: int64(2 * j), Stream: uint64(j % 3), BlockSize: int64(3 * j)}
		if i%1100 >= 1000 {
			ev.Pool = allocator.PoolID{A: uint64(i / 1100), B: 7}
		}
		f.event(&ev)
		want[i] = trace.Event{Seq: int64(i), Device: 2, Kind: replay.KindOf(ev.Action), Addr: ev.Addr, Size: ev.Size, Stream: ev.Stream,
			Pool: trace.PoolID(ev.Pool), Stack: r.stacks[(i/700)%2], BlockSize: ev.BlockSize, DeviceUsed: int64(i / 900 * 900)}
	}
	f.flush()
	r.finish()
	after := time.Now().UnixMicro()
	if got := r.events(); got != n {
		t.Errorf("the recorder counts %d events, want %d", got, n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := trace.NewReader(&buf, "marks")
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	last, lastUsed := before, int64(0)
	for rd.Next() {
		got := *rd.Event()
		if got.TimeUs < last || got.TimeUs > after {
			t.Fatalf("event %d: time %d, previous %d, end %d", i, got.TimeUs, last, after)
		}
		last = got.TimeUs
		got.TimeUs = 0
		u := got.DeviceUsed
		if w := want[i].DeviceUsed; u != w && u == lastUsed && i-int(w) < maxClockEvery {
			got.DeviceUsed = w // the previous reading, noted late: not by more than maxClockEvery events
		}
		lastUsed = u
		if got != want[i] {
			t.Fatalf("event %d: got %+v, want %+v", i, got, want[i])
		}
		i++
	}
	if rd.Err() != nil || i != n {
		t.Fatalf("read %d of %d events: %v", i, n, rd.Err())
	}
}

// fakeReading stands in for cuda.MemorySampler: a reading the test sets.
type fakeReading struct{ atomic.Int64 }

func (f *fakeReading) Latest() int64 { return f.Load() }

// The clock is read about clockPeriod apart: every event when events are
// sparse (so their times are exact), rarely when they come fast.
func TestRecorderPace(t *testing.T) {
	w := trace.NewWriter(&copySink{}, trace.Meta{}, trace.WriterOptions{})
	r := newRecorder(w, newTestAllocator(t), 0, 0, 0)
	f := newFeeder(r)
	ev := allocator.Event{Action: allocator.ActAlloc, Addr: 1 << 40, Size: 512, BlockSize: 512}
	for range 20 {
		f.event(&ev)
		time.Sleep(3 * clockPeriod)
	}
	if r.every != 1 {
		t.Errorf("events %v apart: a clock read every %d events, want every event", 3*clockPeriod, r.every)
	}
	for range 100_000 {
		f.event(&ev)
	}
	if r.every < 8 {
		t.Errorf("back-to-back events: a clock read every %d events, want at least 8", r.every)
	}
	f.flush()
	r.finish()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Chunks come back last-returned first, and a recorder that waits for one
// (every chunk made and in the encoder's hands) gets the next one returned.
func TestChunkReuse(t *testing.T) {
	e := &encoder{wake: make(chan struct{}, 1), freed: make(chan struct{}, 1)}
	a, b := e.chunk(), e.chunk()
	a.n, b.n = 1, 2
	e.put(a)
	e.put(b)
	if c := e.chunk(); c != b || c.n != 0 {
		t.Fatalf("got chunk %p (n = %d), want the one returned last, %p, reset", c, c.n, b)
	}
	if c := e.chunk(); c != a {
		t.Fatalf("got chunk %p, want %p", c, a)
	}
	e.nmade = ringChunks
	got := make(chan *chunk)
	go func() { got <- e.chunk() }()
	for {
		e.freeMu.Lock()
		waiting := e.waiting
		e.freeMu.Unlock()
		if waiting {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-e.wake: // the waiting recorder kicks the encoder
	default:
		t.Error("a recorder waiting for a chunk did not kick the encoder")
	}
	e.put(a)
	if c := <-got; c != a {
		t.Fatalf("the waiting recorder got %p, want %p", c, a)
	}
}
