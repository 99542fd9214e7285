package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// liveTrace records n 512-byte allocations, none freed, on the simulated
// device: a trace whose last event is its peak of n live blocks.
func liveTrace(tb testing.TB, dir string, n int) string {
	return pipeline.RecordWorkload(tb, filepath.Join(dir, fmt.Sprintf("live-%d.arrows", n)), fmt.Sprintf("alloc b 512 count=%d\n", n))
}

// peakHeap is a Summarizer that, at the trace's last alloc (its peak of
// live blocks), collects the garbage and notes the bytes the heap still
// holds: the replay's and the analysis's state for every live block.
type peakHeap struct {
	*analysis.Summarizer
	left int64
	heap uint64
}

func (p *peakHeap) Event(ev *trace.Event) {
	p.Summarizer.Event(ev)
	if ev.Kind != trace.KindAlloc {
		return
	}
	if p.left--; p.left == 0 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		p.heap = ms.HeapAlloc
	}
}

// liveHeap replays path as `tracer replay` does (the recorded settings,
// compared with the recording, the replayed events summarized) and returns
// the heap bytes held at its n-th alloc beyond those held before it.
func liveHeap(tb testing.TB, path string, n int) int64 {
	tb.Helper()
	rd, err := trace.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer rd.Close()
	obs := &peakHeap{Summarizer: analysis.NewSummarizer(analysis.Options{}), left: int64(n)}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	if _, err := replay.Run(context.Background(), rd, replay.Options{Conf: allocator.DefaultConf(), Recorded: true}, obs); err != nil {
		tb.Fatal(err)
	}
	if obs.heap == 0 {
		tb.Fatalf("%s: the observer saw fewer than %d allocs", path, n)
	}
	runtime.KeepAlive(obs)
	return int64(obs.heap) - int64(before)
}

// BenchmarkLiveBlockMemory reports the heap a replay holds per live block
// (the allocator model, the replay's address map and the summarizer) at
// n, 2n, 4n and 8n live blocks, and the marginal bytes per block from n
// to 8n, which leaves out what does not grow with the blocks.
func BenchmarkLiveBlockMemory(b *testing.B) {
	const base int = 50_000
	dir := b.TempDir()
	var paths [4]string
	for k := range paths {
		paths[k] = liveTrace(b, dir, base<<k)
	}
	var heap [4]int64
	for b.Loop() {
		for k, p := range paths {
			heap[k] = liveHeap(b, p, base<<k)
		}
	}
	for k := range heap {
		b.ReportMetric(float64(heap[k])/float64(base<<k), fmt.Sprintf("B/block@%dn", 1<<k))
	}
	b.ReportMetric(float64(heap[3]-heap[0])/float64(7*base), "B/block")
	os.RemoveAll(dir)
}
