package allocator

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// The growth benchmarks run one workload at n, 2n, 4n and 8n and report the
// time per unit of n at each size and the growth exponent, log2 of the time
// at 8n over the time at 4n: 1 for work linear in n, 2 for quadratic. The
// workloads are the axes on which the free sets once grew as n^2 or worse.
// They use the exported API alone, so that they run on older versions too.

// benchGrowth runs run(n) at base, 2·base, 4·base and 8·base each
// iteration, and keeps each size's fastest run: on a busy machine the
// fastest is the least disturbed. slope is the least-squares fit of log2
// time on log2 n over the four sizes.
func benchGrowth(b *testing.B, base int, run func(b *testing.B, n int)) {
	var t [4]time.Duration
	for range b.N {
		for k := range t {
			start := time.Now()
			run(b, base<<k)
			if d := time.Since(start); t[k] == 0 || d < t[k] {
				t[k] = d
			}
		}
	}
	var sy, sxy float64
	for k := range t {
		b.ReportMetric(float64(t[k].Nanoseconds())/float64(base<<k), fmt.Sprintf("ns/unit@%dn", 1<<k))
		y := math.Log2(float64(t[k]))
		sy += y
		sxy += float64(k) * y
	}
	// x = 0..3: mean 1.5, sum of squared deviations 5.
	b.ReportMetric((sxy-1.5*sy)/5, "slope")
	b.ReportMetric(math.Log2(float64(t[3])/float64(t[2])), "exponent")
}

func growthAlloc(b *testing.B, conf string) *Allocator {
	c, err := ParseConf(conf)
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(c, NewSimDevice(1<<52))
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func mustMalloc(b testing.TB, a *Allocator, size int64, stream uint64) uint64 {
	addr, err := a.Malloc(size, stream)
	if err != nil {
		b.Fatal(err)
	}
	return addr
}

func mustFree(b testing.TB, a *Allocator, addr uint64) {
	if err := a.Free(addr); err != nil {
		b.Fatal(err)
	}
}

// oneSize keeps 2n blocks of size, frees every other one in ascending
// address order (n free blocks of one size that cannot merge: one size
// class), takes them back by best fit and frees everything.
func oneSize(conf string, size int64) func(b *testing.B, n int) {
	return func(b *testing.B, n int) {
		a := growthAlloc(b, conf)
		addrs := make([]uint64, 2*n)
		for i := range addrs {
			addrs[i] = mustMalloc(b, a, size, 0)
		}
		for i := 1; i < len(addrs); i += 2 {
			mustFree(b, a, addrs[i])
		}
		for i := 1; i < len(addrs); i += 2 {
			addrs[i] = mustMalloc(b, a, size, 0)
		}
		for _, x := range addrs {
			mustFree(b, a, x)
		}
	}
}

// crossStream frees n blocks that a second stream used (record_stream) and
// completes their events in free order, one at a time.
func crossStream(b *testing.B, n int) {
	a := growthAlloc(b, "")
	addrs := make([]uint64, n)
	for i := range addrs {
		addrs[i] = mustMalloc(b, a, 512, 0)
		if err := a.RecordStream(addrs[i], 1); err != nil {
			b.Fatal(err)
		}
	}
	for _, x := range addrs {
		mustFree(b, a, x)
	}
	for _, x := range addrs {
		if err := a.CompleteFree(x); err != nil {
			b.Fatal(err)
		}
	}
}

// manyStreams allocates a block on each of n streams (in no order of their
// ids), then frees and allocates it again on each stream in turn, 4 times.
func manyStreams(b *testing.B, n int) {
	a := growthAlloc(b, "")
	st := func(i int) uint64 { return uint64(i+1) * 0x9e3779b97f4a7c15 }
	addrs := make([]uint64, n)
	for i := range addrs {
		addrs[i] = mustMalloc(b, a, 512, st(i))
	}
	for range 4 {
		for i, x := range addrs {
			mustFree(b, a, x)
			addrs[i] = mustMalloc(b, a, 512, st(i))
		}
	}
}

// BenchmarkGrowth: ns/unit@kn is the time per block (per stream for
// streams) at k times the base size; exponent is the growth from 4n to 8n.
func BenchmarkGrowth(b *testing.B) {
	cases := []struct {
		name string
		base int
		run  func(*testing.B, int)
	}{
		{"oneSize512B", 25000, oneSize("", 512)},
		{"oneSize2MiB", 25000, oneSize("", 2<<20)},
		{"oneSize1MiB-expandable", 25000, oneSize("expandable_segments:True", 1<<20)},
		{"crossStream", 25000, crossStream},
		{"streams", 10000, manyStreams},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) { benchGrowth(b, c.base, c.run) })
	}
}
