package record

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/allocator"
)

// TestLiveListMatchesSlice runs random pushes, drops by position and
// compactions on a liveList and on a plain slice, and compares them.
func TestLiveListMatchesSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var l liveList
	var want []uint64
	next := uint64(1)
	for step := range 20000 {
		if len(want) == 0 || rng.IntN(5) < 3 {
			l.push(next, allocator.Handle(next+7))
			want = append(want, next)
			next++
		} else {
			k := rng.IntN(len(want))
			i := l.index(k)
			if got, h := l.at(i); got != want[k] || h != allocator.Handle(want[k]+7) {
				t.Fatalf("step %d: position %d holds %d (handle %d), want %d (handle %d)", step, k, got, h, want[k], want[k]+7)
			}
			l.drop(i)
			want = slices.Delete(want, k, k+1)
			if rng.IntN(8) == 0 {
				l.compact()
			}
		}
		if l.Len() != len(want) {
			t.Fatalf("step %d: %d live, want %d", step, l.Len(), len(want))
		}
	}
	var got []uint64
	l.each(func(a uint64, h allocator.Handle) bool {
		if h != allocator.Handle(a+7) {
			t.Fatalf("buffer %d has handle %d, want %d", a, h, a+7)
		}
		got = append(got, a)
		return true
	})
	if !slices.Equal(got, want) {
		t.Fatalf("live buffers differ: %d against %d", len(got), len(want))
	}
}

// TestLiveListLogarithmic: with 2^17 live buffers, freeing the newest, the
// oldest or one in the middle touches O(log n) tree nodes, amortised over
// the compactions.
func TestLiveListLogarithmic(t *testing.T) {
	const n = 1 << 17
	var l liveList
	for i := range n {
		l.push(uint64(i), 0)
	}
	l.visits = 0
	const ops = 4096
	for k := range ops {
		l.push(uint64(n+k), 0)
		var p int
		switch k % 3 {
		case 0:
			p = l.Len() - 1
		case 1:
			p = 0
		default:
			p = l.Len() / 2
		}
		l.drop(l.index(p))
		l.compact()
	}
	if limit := ops * 4 * (bits.Len(n) + 1); l.visits > limit {
		t.Fatalf("%d push/free pairs among %d live buffers touched %d nodes, want at most %d", ops, n, l.visits, limit)
	}
}

// freesWorkload is the workload-frees axis: n long-lived buffers in a
// group, then n rounds of one more buffer freed at once (`free t from=-1`).
func freesWorkload(n int) string {
	return fmt.Sprintf("alloc t 512 count=%d\nrepeat %d\n  alloc t 512\n  free t from=-1\nend\n", n, n)
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

// BenchmarkWorkloadFrees records freesWorkload at n, 2n, 4n and 8n on the
// simulated device and reports the time's growth exponent (1 is linear).
func BenchmarkWorkloadFrees(b *testing.B) {
	ns := []int{5000, 10000, 20000, 40000}
	ws := make([]*Workload, len(ns))
	for i, n := range ns {
		w, err := ParseWorkload("frees.workload", []byte(freesWorkload(n)))
		if err != nil {
			b.Fatal(err)
		}
		ws[i] = w
	}
	times := make([]time.Duration, len(ns))
	for range b.N {
		for i, w := range ws {
			a := benchAllocator(b)
			start := time.Now()
			if err := newExecutor(context.Background(), w, a).run(); err != nil {
				b.Fatal(err)
			}
			times[i] += time.Since(start)
		}
	}
	b.ReportMetric(growthExponent(ns, times), "growth-exp")
	b.ReportMetric(float64(times[len(ns)-1].Microseconds())/float64(b.N)/1e3, "ms@8n")
}
