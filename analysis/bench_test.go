package analysis_test

import (
	"syscall"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/analysis/analysistest"
	"github.com/tracer-dev/tracer/trace"
)

// cycle is a synthetic stream that ends empty, fed repeatedly (with Seq and
// TimeUs shifted) to make streams of any length from 1M stored events.
var cycle []trace.Event

func stream(b *testing.B, n int, fn func(*trace.Event)) {
	if cycle == nil {
		analysistest.Training(1, 1_000_000, func(ev *trace.Event) { cycle = append(cycle, *ev) })
	}
	span := cycle[len(cycle)-1].TimeUs - cycle[0].TimeUs + 1
	var ev trace.Event
	for done, rep := 0, int64(0); done < n; rep++ {
		for i := range cycle {
			if done == n {
				break
			}
			ev = cycle[i]
			ev.Seq += rep * int64(len(cycle))
			ev.TimeUs += rep * span
			fn(&ev)
			done++
		}
	}
}

// BenchmarkSummarizer analyses a 10M-event synthetic training stream.
func BenchmarkSummarizer(b *testing.B) {
	const n = 10_000_000
	stream(b, 1, func(*trace.Event) {}) // build the cycle outside the timer
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var sum *analysis.Summary
	for i := 0; i < b.N; i++ {
		s := analysis.NewSummarizer(analysis.Options{})
		stream(b, n, s.Event)
		sum = s.Finalize()
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	// CPU time per event, including feeding the stream (see BenchmarkStream):
	// steadier than wall time on a shared machine.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*n), "cpu-ns/event")
	b.ReportMetric(float64(sum.Peaks.Reserved.Bytes)/(1<<20), "peak-reserved-MiB")
	b.ReportMetric(100*sum.Fragmentation.ExternalRatio, "ext-frag-%")
}

// BenchmarkStream measures feeding the stream alone, to subtract.
func BenchmarkStream(b *testing.B) {
	const n = 10_000_000
	stream(b, 1, func(*trace.Event) {})
	b.ResetTimer()
	var c int
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		stream(b, n, func(*trace.Event) { c++ })
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*n), "cpu-ns/event")
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
