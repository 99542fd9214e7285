package record_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/trace"
)

// recordSim records w on a fresh simulated device and returns the trace path.
func recordSim(t testing.TB, w *record.Workload, opts record.Options) (string, *record.Result) {
	t.Helper()
	tg, err := record.OpenTarget(record.DeviceSim, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	opts.Workload, opts.Target = w, tg
	if opts.Out == "" {
		opts.Out = filepath.Join(t.TempDir(), w.Name+".arrows")
	}
	res, err := record.Record(context.Background(), opts)
	if err != nil {
		t.Fatalf("record %s: %v", w.Name, err)
	}
	return opts.Out, res
}

func parse(t testing.TB, src string) *record.Workload {
	t.Helper()
	w, err := record.ParseWorkload("test.workload", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// state is the memory a trace describes after some event: what the
// articles' memory_allocated() and memory_reserved() would print.
type state struct {
	allocated, reserved, requested int64
}

// replayState folds a trace into allocated/reserved bytes over time. It
// returns the peaks, the state at every snapshot marker, the final state,
// and the events.
func replayState(t *testing.T, path string) (peak state, marks []state, final state, evs []trace.Event) {
	t.Helper()
	rd, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var cur state
	live := map[uint64][2]int64{}
	for rd.Next() {
		ev := *rd.Event()
		evs = append(evs, ev)
		switch ev.Kind {
		case trace.KindSegmentAlloc:
			cur.reserved += ev.Size
		case trace.KindSegmentFree:
			cur.reserved -= ev.Size
		case trace.KindAlloc:
			if ev.BlockSize == 0 {
				t.Fatalf("event %d: alloc without its block size", ev.Seq)
			}
			live[ev.Addr] = [2]int64{ev.BlockSize, ev.Size}
			cur.allocated += ev.BlockSize
			cur.requested += ev.Size
		case trace.KindFreeRequested:
			b := live[ev.Addr]
			delete(live, ev.Addr)
			cur.allocated -= b[0]
			cur.requested -= b[1]
		case trace.KindSnapshot:
			marks = append(marks, cur)
			if ev.Size != cur.allocated {
				t.Errorf("snapshot at event %d: active %d, want %d", ev.Seq, ev.Size, cur.allocated)
			}
		}
		peak.allocated = max(peak.allocated, cur.allocated)
		peak.reserved = max(peak.reserved, cur.reserved)
		peak.requested = max(peak.requested, cur.requested)
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if rd.Truncated() {
		t.Fatalf("%s: complete recording reads as truncated", path)
	}
	return peak, marks, cur, evs
}

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// A recording says where it came from, and each event names its statement.
func TestRecordMetaAndStacks(t *testing.T) {
	conf, err := allocator.ParseConf("max_split_size_mb:64")
	if err != nil {
		t.Fatal(err)
	}
	w := parse(t, "description meta\nrepeat 2\n  alloc a 1MiB\nend\n")
	path, res := recordSim(t, w, record.Options{Conf: conf, Limit: 1 * gib})
	rd, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	m := rd.Meta()
	if m.Source != trace.SourceRecord || m.AllocConf != "max_split_size_mb:64" || m.MemoryLimit != gib ||
		m.DeviceTotal != record.DefaultSimMemory || m.Extra["workload"] != "test" || m.Extra["device"] != "sim" {
		t.Errorf("meta = %+v", m)
	}
	var last int64
	n := 0
	for rd.Next() {
		ev := rd.Event()
		n++
		if ev.TimeUs < last || ev.TimeUs < time.Now().Add(-time.Hour).UnixMicro() {
			t.Errorf("event %d: time %d µs (previous %d)", ev.Seq, ev.TimeUs, last)
		}
		last = ev.TimeUs
		st := rd.Stack(ev.Stack)
		if len(st) != 2 || st[0].Name != "alloc a 1MiB" || st[0].Line != 3 || st[1].Name != "repeat 2" || st[0].File != "test.workload" {
			t.Errorf("event %d: stack %v", ev.Seq, st)
		}
	}
	if int64(n) != res.Events || n != 3 { // segment_alloc, alloc, alloc
		t.Errorf("%d events read, %d recorded; want 3", n, res.Events)
	}
}

// A failing statement stops the run but leaves a complete trace; an OOM's
// error wraps allocator.ErrOOM and the trace ends with the oom event.
func TestRecordOOM(t *testing.T) {
	w, _ := record.Builtin("fragment-10mb")
	tg, _ := record.OpenTarget(record.DeviceSim, 0, 0)
	out := filepath.Join(t.TempDir(), "oom.arrows")
	res, err := record.Record(context.Background(), record.Options{Workload: w, Target: tg, Limit: 1100 * mib, Out: out})
	var se *record.StatementError
	if !errors.As(err, &se) || !allocator.IsOOM(err) || !strings.HasPrefix(se.Pos, "fragment-10mb.workload:") {
		t.Fatalf("err = %v, want an OOM StatementError", err)
	}
	if res == nil || res.Stats.NumOOMs != 1 {
		t.Fatalf("res = %+v", res)
	}
	_, _, _, evs := replayState(t, out)
	if last := evs[len(evs)-1]; last.Kind != trace.KindOOM {
		t.Errorf("last event %v, want oom", last.Kind)
	}
}

func TestRecordRunErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"alloc a 1\nfree a\nfree a\n", "test.workload:3: free a: no live a buffers"},
		{"alloc a 1 count=2\nfree a from=2\n", "test.workload:2: free a from=2: 2 live a buffers, none at position 2"},
		{"alloc a 1\nfree a\nrecord_stream a stream=1\n", "test.workload:3: record_stream a stream=1: no live a buffers"},
	} {
		tg, _ := record.OpenTarget(record.DeviceSim, 0, 0)
		_, err := record.Record(context.Background(), record.Options{Workload: parse(t, tc.src), Target: tg, Out: filepath.Join(t.TempDir(), "x.arrows")})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: err = %v, want %s", tc.src, err, tc.want)
		}
	}
}

// free picks buffers by position; record_stream delays the free until sync.
func TestFreeSelectionAndStreams(t *testing.T) {
	w := parse(t, `alloc a 1KiB count=10
free a from=1 step=3 count=2   # a[1], a[4]
free a from=-1                 # a[9]
free a reverse count=2         # the two oldest left, a[0] and a[2], newest first
alloc s 4KiB stream=7
record_stream s stream=9
free s
alloc u 2KiB stream=7          # the events are not done: s stays pending
sync
alloc t 4KiB stream=7
`)
	path, _ := recordSim(t, w, record.Options{})
	_, _, _, evs := replayState(t, path)
	var allocs []uint64
	var freed []int
	idx := map[uint64]int{}
	pendingDone := false
	for i, ev := range evs {
		switch ev.Kind {
		case trace.KindAlloc:
			if ev.Size == 1024 {
				idx[ev.Addr] = len(allocs)
				allocs = append(allocs, ev.Addr)
			}
		case trace.KindFreeRequested:
			if ev.Size == 1024 {
				freed = append(freed, idx[ev.Addr])
			} else if next := evs[i+1]; ev.Size == 4096 && (next.Kind != trace.KindAlloc || next.Size != 2048) {
				t.Errorf("after the record_stream block's free_requested: %v of %d bytes, want the 2 KiB alloc", next.Kind, next.Size)
			}
		case trace.KindFreeCompleted:
			if ev.Size == 4096 {
				pendingDone = evs[i+1].Kind == trace.KindAlloc && evs[i+1].Stream == 7
			}
		}
	}
	want := []int{1, 4, 9, 2, 0}
	if fmt.Sprint(freed) != fmt.Sprint(want) {
		t.Errorf("freed %v, want %v", freed, want)
	}
	if !pendingDone {
		t.Errorf("the pending free did not complete at the alloc after sync")
	}
}

// A cancelled context stops the run between operations; the trace is closed.
func TestRecordInterrupted(t *testing.T) {
	w := parse(t, "repeat 1000000000\n  alloc a 1KiB\n  free a\nend\n")
	tg, _ := record.OpenTarget(record.DeviceSim, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	out := filepath.Join(t.TempDir(), "int.arrows")
	res, err := record.Record(ctx, record.Options{Workload: w, Target: tg, Out: out})
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || res.Events == 0 {
		t.Fatalf("res %+v, err %v", res, err)
	}
	rd, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	for rd.Next() {
		n++
	}
	if n != res.Events || rd.Truncated() {
		t.Errorf("read %d of %d events, truncated %v", n, res.Events, rd.Truncated())
	}
}

// A recording killed mid-run (SIGKILL: no cleanup) leaves a trace readable up
// to its last flushed batch, which trace.Reader reports as truncated.
func TestRecordKilled(t *testing.T) {
	if os.Getenv("TRACER_RECORD_HELPER") != "" {
		w := parse(t, "repeat 1000000000\n  alloc a 1KiB count=8\n  free a\nend\n")
		tg, _ := record.OpenTarget(record.DeviceSim, 0, 0)
		record.Record(context.Background(), record.Options{Workload: w, Target: tg, Out: os.Getenv("TRACER_RECORD_HELPER"), BatchRows: 4096})
		return
	}
	if testing.Short() {
		t.Skip("runs a subprocess")
	}
	out := filepath.Join(t.TempDir(), "killed.arrows")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRecordKilled$")
	cmd.Env = append(os.Environ(), "TRACER_RECORD_HELPER="+out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The recording grows in a partial file beside the output, named so.
	partial := ""
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, _ := filepath.Glob(outfile.PartialPattern(out))
		if len(m) == 1 {
			partial = m[0]
		}
		if st, err := os.Stat(partial); err == nil && st.Size() > 1<<20 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the recording wrote less than 1 MiB in 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a killed recording left a file at the output %s: it goes there whole, at the end", out)
	}
	rd, err := trace.Open(partial)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n := int64(0)
	for rd.Next() {
		if rd.Event().Seq != n {
			t.Fatalf("event %d has seq %d", n, rd.Event().Seq)
		}
		n++
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if !rd.Truncated() || n == 0 || n%4096 != 0 {
		t.Errorf("read %d events (whole batches of 4096 expected), truncated = %v", n, rd.Truncated())
	}
	if rd.Meta().Extra["workload"] != "test" {
		t.Errorf("meta lost: %+v", rd.Meta())
	}
}

// Batches age out: with events trickling, a flush happens within FlushEvery
// even before a batch is full.
func TestRecordFlushesByAge(t *testing.T) {
	w := parse(t, "repeat 1000000000\n  alloc a 1KiB\n  free a\nend\n")
	tg, _ := record.OpenTarget(record.DeviceSim, 0, 0)
	out := filepath.Join(t.TempDir(), "age.arrows")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		record.Record(ctx, record.Options{Workload: w, Target: tg, Out: out, BatchRows: 1 << 30, FlushEvery: 50 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		m, _ := filepath.Glob(outfile.PartialPattern(out))
		if len(m) != 1 {
			continue
		}
		rd, err := trace.Open(m[0])
		if err != nil {
			continue
		}
		n := 0
		for rd.Next() {
			n++
		}
		rd.Close()
		if n > 0 {
			return
		}
	}
	t.Fatal("no batch reached the file although FlushEvery passed")
}

// A simulated device too large for a recording's events is refused when
// opened, not when its first huge segment would be recorded.
func TestOpenTargetTooLarge(t *testing.T) {
	if _, err := record.OpenTarget(record.DeviceSim, 0, record.MaxSimMemory); err != nil {
		t.Fatalf("the largest simulated device: %v", err)
	}
	_, err := record.OpenTarget(record.DeviceSim, 0, record.MaxSimMemory+1)
	if err == nil || !strings.Contains(err.Error(), "larger than a recording holds") {
		t.Fatalf("a device of 64 PiB: err = %v", err)
	}
}
