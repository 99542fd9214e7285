package record

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// A live recording holds exactly the events the allocator emits, each with
// the statement that made it and its pool, and the snapshot markers in
// their places: checked against the same workload run on an allocator whose
// Observer notes every event with the statement running. The recording
// takes the events through the allocator's EventSink, in runs up to each
// clock read, so statements change (and markers come) while the allocator
// holds events not yet handed over.
func TestRecordMatchesAllocator(t *testing.T) {
	w, err := ParseWorkload("sink.workload", []byte(`description sink
repeat 500
  alloc a 516 count=7
  alloc b 2MiB+1 count=3
  free a
  snapshot
  free b reverse
  alloc c 30MiB
  free c
end
empty_cache
`))
	if err != nil {
		t.Fatal(err)
	}
	type noted struct {
		ev    trace.Event
		stack trace.Stack
	}
	var want []noted
	{
		a, err := allocator.New(allocator.DefaultConf(), simTarget(DefaultSimMemory, 0).Dev)
		if err != nil {
			t.Fatal(err)
		}
		var cur *stmt
		a.SetObserver(allocator.ObserverFunc(func(e *allocator.Event) {
			want = append(want, noted{trace.Event{Kind: replay.KindOf(e.Action), Addr: e.Addr, Size: e.Size, Stream: e.Stream,
				Pool: trace.PoolID(e.Pool), BlockSize: e.BlockSize}, cur.stack(w)})
		}))
		x := newExecutor(context.Background(), w, a)
		x.setStmt = func(s *stmt) { cur = s }
		x.snapshot = func() error {
			want = append(want, noted{trace.Event{Kind: trace.KindSnapshot, Size: a.Stats().ActiveBytes[0].Current}, cur.stack(w)})
			return nil
		}
		if err := x.run(); err != nil {
			t.Fatal(err)
		}
	}

	opts := &Options{Workload: w, Target: simTarget(DefaultSimMemory, 0)}
	a, err := allocator.New(allocator.DefaultConf(), opts.Target.Dev)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	res, err := recordTo(context.Background(), opts, a, trace.NewWriter(&buf, recordMeta(opts, a), trace.WriterOptions{BatchRows: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := trace.NewReader(&buf, "sink")
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	snapshots := 0
	for rd.Next() {
		got := *rd.Event()
		if i >= len(want) {
			t.Fatalf("more events recorded than the allocator emitted (%d)", len(want))
		}
		got.Seq, got.TimeUs, got.Device, got.DeviceUsed = 0, 0, 0, 0
		stack := rd.Stack(got.Stack)
		got.Stack = 0
		if got != want[i].ev || fmt.Sprint(stack) != fmt.Sprint(want[i].stack) {
			t.Fatalf("event %d: recorded %+v at %v, want %+v at %v", i, got, stack, want[i].ev, want[i].stack)
		}
		if got.Kind == trace.KindSnapshot {
			snapshots++
		}
		i++
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(want) || res.Events != int64(i) {
		t.Fatalf("recorded %d events (result: %d), the allocator emitted %d", i, res.Events, len(want))
	}
	if snapshots != 500 || i < 3*chunkEvents {
		t.Fatalf("%d events, %d snapshots: the workload should span several chunks, with 500 snapshots", i, snapshots)
	}
}
