package analysis

import (
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/trace"
)

// The scale axes: deterministic traces whose per-event cost the summarizer
// once paid in proportion to the live blocks or segments. Each takes n and
// returns O(n) events; BenchmarkAxes times them at n, 2n, 4n and 8n.

const (
	axisBase = 0x7f0000000000
)

// axisUnmapFreed: n 20 MiB ranges of one expandable segment, each holding a
// 2 MiB block; every other block freed, then its range unmapped
// (empty_cache): each unmap splits the mapped range around blocks.
func axisUnmapFreed(n int) []trace.Event {
	var evs []trace.Event
	at := func(i int) uint64 { return axisBase + uint64(i)*uint64(20*MiB) }
	for i := range n {
		evs = append(evs, segMap(at(i), 20*MiB), alloc(at(i), 2*MiB, 2*MiB, 1))
	}
	for i := 1; i < n; i += 2 {
		evs = append(evs, freeReq(at(i)), freeDone(at(i)))
	}
	for i := 1; i < n; i += 2 {
		evs = append(evs, segUnmap(at(i), 20*MiB))
	}
	return evs
}

// axisRefill is axisUnmapFreed, then each unmapped range mapped again (each
// map joins two ranges) and refilled.
func axisRefill(n int) []trace.Event {
	evs := axisUnmapFreed(n)
	for i := 1; i < n; i += 2 {
		a := axisBase + uint64(i)*uint64(20*MiB)
		evs = append(evs, segMap(a, 20*MiB), alloc(a, 2*MiB, 2*MiB, 1))
	}
	return evs
}

// axisGrowingSizes: n 512-byte blocks live in one segment, with 512-byte
// holes between them, then n requests of growing sizes, each reserving a
// segment of its own first: a grow past the largest free block every time.
func axisGrowingSizes(n int) []trace.Event {
	size := (int64(n)*1024 + 2*MiB - 1) / (2 * MiB) * (2 * MiB)
	evs := []trace.Event{segAlloc(axisBase, size)}
	for i := range n {
		evs = append(evs, alloc(axisBase+uint64(i)*1024, 512, 512, 1))
	}
	a := uint64(axisBase) + uint64(size)
	for j := range n {
		bs := 2*MiB + int64(j+1)*512
		evs = append(evs, segAlloc(a, bs), alloc(a, bs, bs, 2))
		a += uint64(bs+2*MiB-1) / uint64(2*MiB) * uint64(2*MiB)
	}
	return evs
}

// axisPlateaus: n 2 MiB segments, each with a 512-byte block at its start;
// then in each segment a 1 KiB block allocated and the 512-byte one freed:
// the allocated bytes rise to a new maximum at the reserved peak every
// round (a new plateau), and the free after it takes the layout.
func axisPlateaus(n int) []trace.Event {
	var evs []trace.Event
	at := func(i int) uint64 { return axisBase + uint64(i)*uint64(2*MiB) }
	for i := range n {
		evs = append(evs, segAlloc(at(i), 2*MiB), alloc(at(i), 512, 512, 1))
	}
	for i := range n {
		evs = append(evs, alloc(at(i)+4096, 1024, 1024, 2), freeReq(at(i)), freeDone(at(i)))
	}
	return evs
}

// axisSegmentChurn: n segments live, then n segments allocated and freed
// below all of them, each the first by address.
func axisSegmentChurn(n int) []trace.Event {
	var evs []trace.Event
	top := uint64(axisBase) + uint64(n)*uint64(2*MiB)
	for i := range n {
		evs = append(evs, segAlloc(top+uint64(i)*uint64(2*MiB), 2*MiB))
	}
	for i := range n {
		a := top - uint64(i+1)*uint64(2*MiB)
		evs = append(evs, segAlloc(a, 2*MiB), alloc(a, 512, 512, 1), freeReq(a), freeDone(a), segFree(a, 2*MiB))
	}
	return evs
}

// axes names the generators.
var axes = []struct {
	name string
	gen  func(int) []trace.Event
}{
	{"unmap-freed", axisUnmapFreed},
	{"refill", axisRefill},
	{"growing-sizes", axisGrowingSizes},
	{"plateaus", axisPlateaus},
	{"segment-churn", axisSegmentChurn},
}

// summarize runs evs through a Summarizer (Seq numbered) and finalizes it.
func summarize(evs []trace.Event) *Summary {
	s := NewSummarizer(Options{})
	for i := range evs {
		ev := evs[i]
		ev.Seq = int64(i)
		s.Event(&ev)
	}
	return s.Finalize()
}

// growthExponent is the least-squares slope of log(time) against log(n).
func growthExponent(ns []int, times []time.Duration) float64 {
	var sx, sy, sxx, sxy float64
	for i, n := range ns {
		x, y := math.Log(float64(n)), math.Log(float64(times[i])+1)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	k := float64(len(ns))
	return (k*sxy - sx*sy) / (k*sxx - sx*sx)
}

// processCPU is the process's CPU time: steadier than the wall clock on a
// shared machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAxes analyses each axis at n, 2n, 4n and 8n and reports the
// growth exponent of the CPU time (1: linear) and the CPU time at 8n.
func BenchmarkAxes(b *testing.B) {
	ns := []int{2000, 4000, 8000, 16000}
	for _, ax := range axes {
		b.Run(ax.name, func(b *testing.B) {
			evs := make([][]trace.Event, len(ns))
			for i, n := range ns {
				evs[i] = ax.gen(n)
			}
			times := make([]time.Duration, len(ns))
			for range b.N {
				for i := range ns {
					start := processCPU()
					summarize(evs[i])
					times[i] += processCPU() - start
				}
			}
			b.ReportMetric(growthExponent(ns, times), "growth-exp")
			b.ReportMetric(float64(times[len(ns)-1].Microseconds())/float64(b.N)/1e3, "cpu-ms@8n")
		})
	}
}
