package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// TestPreparedModel: a replay of a trace file past prepareMin makes its
// model's memory before the model starts and faults it in off the model's
// thread (modelPrep): the results and summaries are a plain replay's, and
// the model's thread takes a quarter of the page faults at most (300,000
// blocks live at once, then every other one freed: the arena and the
// table a plain replay doubles and first touches on that thread).
func TestPreparedModel(t *testing.T) {
	in, set := recorded(t, writeLive(t, 300_000))
	var stages []StageTimes
	OnStages = func(s StageTimes) { stages = append(stages, s) }
	defer func() { OnStages = nil }()
	defer func(m int64) { prepareMin = m }(prepareMin)
	replayWith := func(min int64) (*Run, StageTimes) {
		prepareMin = min
		runtime.GC() // the plain replay's arrays must not be reused, zeroed, by the next
		run, err := Replay(context.Background(), in, set, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return run, stages[len(stages)-1]
	}
	plain, plainStages := replayWith(1 << 62)
	prepared, prepStages := replayWith(0)
	strip := func(r *Run) any {
		devs := slices.Clone(r.Result.Devices)
		for i := range devs {
			devs[i].Allocator = nil
		}
		return []any{devs, r.Summaries}
	}
	if !reflect.DeepEqual(strip(plain), strip(prepared)) {
		t.Error("the prepared replay's results or summaries differ from the plain one's")
	}
	t.Logf("the model's thread's minor faults: plain %d, prepared %d", plainStages.ModelFaults, prepStages.ModelFaults)
	if runtime.GOOS != "linux" || raceBuild {
		return
	}
	if probe := make([]byte, 1<<16); !grow.PagesOf(probe).Populate(0, len(probe)) {
		t.Skip("no MADV_POPULATE_WRITE on this system")
	}
	if prepStages.ModelFaults*4 > plainStages.ModelFaults {
		t.Errorf("the model's thread took %d minor faults prepared, %d plain: want a quarter at most", prepStages.ModelFaults, plainStages.ModelFaults)
	}
}

// TestPreparedSmall: a replay of a trace of a few MiB (40,000 blocks live
// at once, as TestPreparedModel's, 6.5 MB) is prepared too, at the
// default prepareMin: in a process of its own, as the command runs it
// (in this one the heap's pages are resident already), the model's thread
// takes a quarter of a plain replay's faults at most. It fails with
// prepareMin at 16 MiB, where such a replay's model made its memory on
// its own thread.
func TestPreparedSmall(t *testing.T) {
	if path := os.Getenv("TRACER_PREPARED_CHILD"); path != "" {
		if os.Getenv("TRACER_PREPARED_PLAIN") != "" {
			prepareMin = 1 << 62
		}
		in, set := recorded(t, path)
		var faults int64
		OnStages = func(s StageTimes) { faults = s.ModelFaults }
		defer func() { OnStages = nil }()
		if _, err := Replay(context.Background(), in, set, Options{}); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("model faults %d\n", faults)
		return
	}
	if runtime.GOOS != "linux" || raceBuild {
		t.Skip("the model's thread's faults are counted on Linux, without the race detector")
	}
	if probe := make([]byte, 1<<16); !grow.PagesOf(probe).Populate(0, len(probe)) {
		t.Skip("no MADV_POPULATE_WRITE on this system")
	}
	path := writeLive(t, 40_000)
	if st, err := os.Stat(path); err != nil || st.Size() < prepareMin {
		t.Fatalf("the trace is smaller than prepareMin (%v)", err)
	}
	faults := func(plain bool) int64 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestPreparedSmall$")
		cmd.Env = append(os.Environ(), "TRACER_PREPARED_CHILD="+path)
		if plain {
			cmd.Env = append(cmd.Env, "TRACER_PREPARED_PLAIN=1")
		}
		out, err := cmd.CombinedOutput()
		var n int64
		if _, serr := fmt.Sscanf(string(out[bytes.Index(out, []byte("model faults")):]), "model faults %d", &n); err != nil || serr != nil {
			t.Fatalf("%v %v: %s", err, serr, out)
		}
		return n
	}
	plain, prepared := faults(true), faults(false)
	t.Logf("the model's thread's minor faults in a process of its own: plain %d, prepared %d", plain, prepared)
	if prepared*4 > plain {
		t.Errorf("the model's thread took %d minor faults prepared, %d plain: want a quarter at most", prepared, plain)
	}
}

// TestUnmapBehind: a prepared replay hands the summaries' tables and the
// numbering's made outside the heap to be unmapped on a goroutine of
// their own (unmapBehind), still mapped when Replay returns: the caller's
// path does not wait for their pages to be freed. It fails if finish and
// numberAhead unmap them themselves.
func TestUnmapBehind(t *testing.T) {
	var handed []*grow.OffHeap
	defer func(f func(*grow.OffHeap)) { unmapBehind = f }(unmapBehind)
	unmapBehind = func(h *grow.OffHeap) { handed = append(handed, h) }
	in, set := recorded(t, writeLive(t, 40_000))
	if _, err := Replay(context.Background(), in, set, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(handed) != 2 || handed[0].Mapped()+handed[1].Mapped() == 0 {
		t.Fatalf("%d OffHeaps handed to be unmapped behind, want 2, still mapped", len(handed))
	}
	for _, h := range handed {
		h.Release()
	}
}

// writeLive writes a trace of n blocks allocated, then every other one
// freed (the seed experiment's shape), and returns its path.
func writeLive(t *testing.T, n int) string {
	path := filepath.Join(t.TempDir(), "live.arrows")
	w, err := trace.Create(path, trace.Meta{}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	write := func(ev trace.Event) {
		ev.Seq, ev.Stack = seq, trace.NoStack
		seq++
		if err := w.Write(&ev); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		addr := uint64(1)<<40 + uint64(i)*512
		if i%4096 == 0 {
			write(trace.Event{Kind: trace.KindSegmentAlloc, Addr: addr, Size: 2 << 20})
		}
		write(trace.Event{Kind: trace.KindAlloc, Addr: addr, Size: 512, BlockSize: 512})
	}
	for i := 0; i < n; i += 2 { // the seed experiment's shape: every other block freed
		addr := uint64(1)<<40 + uint64(i)*512
		write(trace.Event{Kind: trace.KindFreeRequested, Addr: addr, Size: 512, BlockSize: 512})
		write(trace.Event{Kind: trace.KindFreeCompleted, Addr: addr, Size: 512, BlockSize: 512})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBatchPoolFill: fill puts the batches asked for, each with every page
// of its events resident before anything writes them, so that the model's
// thread, which fills the analysis's batches, takes no fault for them.
func TestBatchPoolFill(t *testing.T) {
	if probe := make([]byte, 1<<16); !grow.PagesOf(probe).Populate(0, len(probe)) {
		t.Skip("no MADV_POPULATE_WRITE on this system")
	}
	p := newBatchPool(behindRows)
	p.fill(3)
	if len(p.ch) != 3 {
		t.Fatalf("%d batches in the pool, want 3", len(p.ch))
	}
	for range 3 {
		b := p.get()
		pages := grow.PagesOf(b.evs)
		n, ok := pages.Resident(0, behindRows)
		want := (pages.Len()*int(unsafe.Sizeof(trace.Event{})) + os.Getpagesize() - 1) / os.Getpagesize()
		if ok && n < want-1 { // the array's first and last pages may be shared
			t.Errorf("%d of a batch's %d pages resident, want all", n, want)
		}
	}
}

// TestReadFill: a replay of a trace file of prepareMin bytes or more has
// the reader's pool filled (fillBehind) with a batch for each 4,096
// events the file holds, at most the pool's room, each without an Emitted
// and its pages resident before the reader writes them; a smaller file's
// is not. It fails if the reader makes its batches itself.
func TestReadFill(t *testing.T) {
	var asked []int
	defer func(f func(batchPool, int)) { fillBehind = f }(fillBehind)
	fillBehind = func(p batchPool, n int) {
		asked = append(asked, n)
		p.fillWith(n, false)
		if n > 0 && len(p.ch) != n {
			if probe := make([]byte, 1<<16); grow.PagesOf(probe).Populate(0, len(probe)) {
				t.Errorf("%d batches in the reader's pool, want %d", len(p.ch), n)
			}
		}
		for range len(p.ch) {
			b := <-p.ch
			if b.emitted != nil || cap(b.evs) != batchRows {
				t.Errorf("a reader's batch of %d events with an Emitted %v", cap(b.evs), b.emitted != nil)
			}
			p.put(b)
		}
	}
	path := writeLive(t, 8_000) // 16k events, about 1.4 MB
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	in, set := recorded(t, path)
	if _, err := Replay(context.Background(), in, set, Options{}); err != nil {
		t.Fatal(err)
	}
	want := int(st.Size()/(eventBytes*batchRows)) + 1
	if len(asked) != 1 || asked[0] != want || st.Size() < prepareMin || want > inFlight+2 {
		t.Errorf("a %d-byte trace file: the reader's pool filled with %v batches, want [%d]", st.Size(), asked, want)
	}
	asked = nil
	in, set = recorded(t, writeLive(t, 2_000))
	if _, err := Replay(context.Background(), in, set, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 0 {
		t.Errorf("a trace file below prepareMin: the reader's pool filled with %v batches, want none", asked)
	}
	if got := readFill(1 << 30); got != inFlight+2 {
		t.Errorf("readFill(1 GiB) = %d, want the pool's room, %d", got, inFlight+2)
	}
}

// TestBlocksGuess: a trace file of prepareMin bytes or more is guessed to
// hold a block live for each bytesPerBlock of it (tune's Options.Blocks);
// a smaller file, one that is gone, and the built-in sample get no guess.
func TestBlocksGuess(t *testing.T) {
	dir := t.TempDir()
	big, small := filepath.Join(dir, "big.arrows"), filepath.Join(dir, "small.arrows")
	if err := os.WriteFile(big, make([]byte, prepareMin+5*bytesPerBlock), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(small, make([]byte, prepareMin-1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   *Input
		want int
	}{
		{&Input{Path: big}, int(prepareMin/bytesPerBlock) + 5},
		{&Input{Path: small}, 0},
		{&Input{Path: filepath.Join(dir, "gone.arrows")}, 0},
		{&Input{Sample: true}, 0},
	} {
		if got := c.in.BlocksGuess(); got != c.want {
			t.Errorf("BlocksGuess of %q (sample %v) = %d, want %d", c.in.Path, c.in.Sample, got, c.want)
		}
	}
}
