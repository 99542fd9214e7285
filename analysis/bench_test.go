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

// BenchmarkSummarizer_phases is BenchmarkSummarizer with record_function
// scopes, forward and backward alternating every 5 ms of the stream.
func BenchmarkSummarizer_phases(b *testing.B) {
	const n = 10_000_000
	stream(b, 1, func(*trace.Event) {})
	t0 := cycle[0].TimeUs
	end := t0 + int64(n/len(cycle)+1)*(cycle[len(cycle)-1].TimeUs-t0+1)
	var as []trace.Annotation
	for t, i := t0, 0; t < end; t, i = t+5000, i+1 {
		name := [2]string{"forward", "backward"}[i%2]
		as = append(as, trace.Annotation{Name: name, Stage: trace.AnnotationStart, TimeUs: t},
			trace.Annotation{Name: name, Stage: trace.AnnotationEnd, TimeUs: t + 4999})
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var sum *analysis.Summary
	for i := 0; i < b.N; i++ {
		s := analysis.NewSummarizer(analysis.Options{Annotations: as})
		stream(b, n, s.Event)
		sum = s.Finalize()
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*n), "cpu-ns/event")
	b.ReportMetric(float64(len(sum.Phases)), "phases")
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
