package record

import (
	"cmp"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/trace"
)

// poolsDevice returns a device with n private segments of 2 MiB, every
// other 2 MiB of address space, in shuffled order, and one default-pool one.
func poolsDevice(n int, rng *rand.Rand) *torchsnap.Device {
	d := &torchsnap.Device{}
	for _, i := range rng.Perm(n) {
		d.Segments = append(d.Segments, torchsnap.Segment{Addr: uint64(i) << 22, TotalSize: 2 << 20,
			Pool: trace.PoolID{A: 1, B: uint64(i + 1)}})
	}
	d.Segments = append(d.Segments, torchsnap.Segment{Addr: uint64(n) << 22, TotalSize: 2 << 20})
	return d
}

// naivePool is tagPools' rule written plainly: the first private segment of
// the snapshot's order that holds addr.
func naivePool(d *torchsnap.Device, addr uint64) (trace.PoolID, bool) {
	for _, s := range d.Segments {
		if !s.Pool.IsDefault() && addr >= s.Addr && addr < s.Addr+uint64(s.TotalSize) {
			return s.Pool, true
		}
	}
	return trace.PoolID{}, false
}

func TestTagPoolsLogarithmic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1 << 16
	d := poolsDevice(n, rng)
	p := privateSegments(d)
	evs := make([]trace.Event, 4096)
	for i := range evs {
		evs[i] = trace.Event{Kind: trace.KindAlloc, Addr: rng.Uint64N(uint64(n+1) << 22)}
	}
	tagPools(evs, p)
	if limit := len(evs) * (bits.Len(n) + 2); p.visits > limit {
		t.Fatalf("tagging %d events among %d private segments examined %d segments, want at most %d",
			len(evs), n, p.visits, limit)
	}
	for _, ev := range evs {
		want, _ := naivePool(d, ev.Addr)
		if ev.Pool != want {
			t.Fatalf("addr %#x: pool %v, want %v", ev.Addr, ev.Pool, want)
		}
	}
}

// TestPoolIDsLinear: the pools of 65,536 private segments, one pool each
// and a few shared, listed once each in the order of their first segment,
// at one look-up a segment (a scan of the pools listed so far was
// quadratic: two thirds of an import of 64,000 graphs' segments).
func TestPoolIDsLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 1 << 16
	d := poolsDevice(n, rng)
	for i := range d.Segments[:n] {
		if i%5 == 0 {
			d.Segments[i].Pool = trace.PoolID{A: 7} // shared by a fifth of them
		}
	}
	p := privateSegments(d)
	p.visits = 0
	ids := p.ids()
	if p.visits > n {
		t.Fatalf("listing the pools of %d segments examined %d, want at most %d", n, p.visits, n)
	}
	var want []allocator.PoolID
	for _, s := range p.pools {
		id := allocator.PoolID{A: s.A, B: s.B}
		if !slices.Contains(want[max(0, len(want)-1):], id) && (id != allocator.PoolID{A: 7} || !slices.Contains(want, id)) {
			want = append(want, id)
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("%d pools listed, want %d (or another order)", len(ids), len(want))
	}
}

// TestTagPoolsOverlap: overlapping segments (a malformed snapshot) keep the
// snapshot's order: the first that holds the address wins.
func TestTagPoolsOverlap(t *testing.T) {
	d := &torchsnap.Device{Segments: []torchsnap.Segment{
		{Addr: 4 << 20, TotalSize: 2 << 20, Pool: trace.PoolID{A: 1, B: 1}},
		{Addr: 0, TotalSize: 8 << 20, Pool: trace.PoolID{A: 1, B: 2}},
	}}
	evs := []trace.Event{{Kind: trace.KindAlloc, Addr: 5 << 20}, {Kind: trace.KindSegmentMap, Addr: 1 << 20},
		{Kind: trace.KindFreeRequested, Addr: 1 << 20}}
	tagPools(evs, privateSegments(d))
	for i, want := range []trace.PoolID{{A: 1, B: 1}, {A: 1, B: 2}, {}} {
		if evs[i].Pool != want {
			t.Errorf("event %d: pool %v, want %v", i, evs[i].Pool, want)
		}
	}
}

// BenchmarkTagPools tags 3n events among n private segments at n, 2n, 4n
// and 8n, and reports the time's growth exponent (1 is linear).
func BenchmarkTagPools(b *testing.B) {
	ns := []int{4000, 8000, 16000, 32000}
	times := make([]time.Duration, len(ns))
	for range b.N {
		for i, n := range ns {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			d := poolsDevice(n, rng)
			evs := make([]trace.Event, 3*n)
			for k := range evs {
				evs[k] = trace.Event{Kind: trace.KindAlloc, Addr: uint64(k/3) << 22}
			}
			start := time.Now()
			tagPools(evs, privateSegments(d))
			times[i] += time.Since(start)
		}
	}
	b.ReportMetric(growthExponent(ns, times), "growth-exp")
}

// TestPrivateSegmentsHeap: indexing 65,536 private segments allocates
// their columns once, 40 bytes a segment (address, end, pool, birth),
// whether the snapshot lists them by address or not. Copies of the
// segments' 112-byte records, grown by append and then cloned to sort,
// took over 300.
func TestPrivateSegmentsHeap(t *testing.T) {
	const n = 1 << 16
	for _, shuffled := range []bool{false, true} {
		d := poolsDevice(n, rand.New(rand.NewPCG(5, 6)))
		if !shuffled {
			slices.SortFunc(d.Segments, func(a, b torchsnap.Segment) int { return cmp.Compare(a.Addr, b.Addr) })
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p := privateSegments(d)
		runtime.ReadMemStats(&after)
		if len(p.addr) != n || p.overlap {
			t.Fatalf("%d segments indexed (overlap %v), want %d", len(p.addr), p.overlap, n)
		}
		limit := uint64(40 * n)
		if shuffled {
			limit += 36 * n // the permutation and the sorted columns
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > limit+4096 {
			t.Errorf("shuffled %v: %d bytes allocated for %d segments, want at most %d", shuffled, got, n, limit)
		}
	}
}
