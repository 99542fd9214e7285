package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// fewLiveTrace writes 1,000 blocks live, then rounds of one block
// allocated and freed: a trace whose events grow with rounds while its
// live blocks do not.
func fewLiveTrace(t *testing.T, rounds int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "few-live.arrows")
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
	base := uint64(1) << 40
	write(trace.Event{Kind: trace.KindSegmentAlloc, Addr: base, Size: 2 << 20})
	for i := range uint64(1000) {
		write(trace.Event{Kind: trace.KindAlloc, Addr: base + 512*i, Size: 512, BlockSize: 512})
	}
	churn := base + 512*1000
	for range rounds {
		write(trace.Event{Kind: trace.KindAlloc, Addr: churn, Size: 512, BlockSize: 512})
		write(trace.Event{Kind: trace.KindFreeRequested, Addr: churn, Size: 512, BlockSize: 512})
		write(trace.Event{Kind: trace.KindFreeCompleted, Addr: churn, Size: 512, BlockSize: 512})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFewLiveHeap: the memory a prepared replay makes for its guess of the
// blocks live at once (the model's arena and table, the numbering's table,
// the summaries' slab: millions of blocks for a large file) lies outside
// the collector's count, so that the Go heap a replay of a trace with
// 1,000 blocks live holds halfway through stays the same when the trace
// is four times as long. Counted, the guess's arrays added about 100
// bytes of heap per block guessed, and the collector's headroom a quarter
// of that in garbage.
func TestFewLiveHeap(t *testing.T) {
	defer func(m int64) { prepareMin = m }(prepareMin)
	prepareMin = 0
	heapAt := func(rounds int) (heap int64, guess int) {
		path := fewLiveTrace(t, rounds)
		in, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		set, err := in.RecordedSettings()
		if err != nil {
			t.Fatal(err)
		}
		half, n := int64(3*rounds/2), int64(0)
		observe := func(*trace.Event) {
			if n++; n == half {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				heap = int64(ms.HeapAlloc)
			}
		}
		if _, err := Replay(context.Background(), in, set, Options{Observe: observe}); err != nil {
			t.Fatal(err)
		}
		if heap == 0 {
			t.Fatalf("%d rounds: the replay emitted fewer than %d events", rounds, half)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return heap, int(st.Size() / bytesPerBlock)
	}
	small, g1 := heapAt(40_000)
	large, g4 := heapAt(160_000)
	grown := large - small
	t.Logf("heap halfway: %d KiB at 40k rounds (a guess of %d blocks), %d KiB at 160k (%d)", small>>10, g1, large>>10, g4)
	if limit := int64(g4-g1) * 16; grown > limit {
		t.Errorf("the heap halfway grew by %d KiB from 40k rounds to 160k, 1,000 blocks live at both: want at most %d KiB (16 bytes a block guessed more)", grown>>10, limit>>10)
	}
}
