package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/trace"
)

// fewLiveTrace records 1,000 blocks live, then rounds of one block
// allocated and freed (growth's few-live-churn axis): a trace whose events
// grow with rounds while its live blocks do not.
func fewLiveTrace(t *testing.T, rounds int) string {
	return recordWorkload(t, filepath.Join(t.TempDir(), "few-live.arrows"),
		fmt.Sprintf("alloc keep 512 count=1000\nrepeat %d\n  alloc t 512\n  free t\nend\n", rounds))
}

// recordWorkload records the workload text on the simulated device into
// a trace at path, which it returns.
func recordWorkload(tb testing.TB, path, text string) string {
	tb.Helper()
	w, err := record.ParseWorkload(filepath.Base(path)+".workload", []byte(text))
	if err != nil {
		tb.Fatal(err)
	}
	tg, err := record.OpenTarget("sim", 0, record.DefaultSimMemory)
	if err != nil {
		tb.Fatal(err)
	}
	defer tg.Close()
	if _, err := record.Record(context.Background(), record.Options{Workload: w, Target: tg, Out: path}); err != nil {
		tb.Fatal(err)
	}
	return path
}

// recorded opens the trace at path, with its recorded settings.
func recorded(tb testing.TB, path string) (*Input, Resolved) {
	tb.Helper()
	in, err := Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	set, err := in.RecordedSettings()
	if err != nil {
		tb.Fatal(err)
	}
	return in, set
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
		in, set := recorded(t, path)
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
	// The heap at one moment of a replay moves by up to 1.5 MiB with what
	// the reader and the analysis hold then: the median of three replays.
	median := func(rounds int) (int64, int) {
		var hs [3]int64
		var guess int
		for i := range hs {
			hs[i], guess = heapAt(rounds)
		}
		slices.Sort(hs[:])
		return hs[1], guess
	}
	small, g1 := median(40_000)
	large, g4 := median(160_000)
	grown := large - small
	t.Logf("heap halfway: %d KiB at 40k rounds (a guess of %d blocks), %d KiB at 160k (%d)", small>>10, g1, large>>10, g4)
	if limit := int64(g4-g1) * 16; grown > limit {
		t.Errorf("the heap halfway grew by %d KiB from 40k rounds to 160k, 1,000 blocks live at both: want at most %d KiB (16 bytes a block guessed more)", grown>>10, limit>>10)
	}
}
