package record

import (
	"math/bits"
	"math/rand"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// The tests of this file bound the work of the import's passes over a
// snapshot's segments (scanWork) and check them against the scans they
// replaced, on random inputs.

func init() { countScans = true }

// TestMisplacedWork: each dumped segment costs O(log n) of the model's n
// private segments, not a scan of them (quadratic on snapshot-segment-churn).
func TestMisplacedWork(t *testing.T) {
	const n = 4096
	d := &torchsnap.Device{}
	var segs []allocator.SegmentInfo
	for i := range n {
		a := uint64(0x100000000) + uint64(i)*2<<20
		d.Segments = append(d.Segments, torchsnap.Segment{Addr: a, TotalSize: 2 << 20})
		segs = append(segs, allocator.SegmentInfo{Addr: a, Size: 2 << 20, Pool: allocator.PoolID{B: uint64(i + 1)}})
	}
	w := scanWork.Load()
	got := misplaced(d, segs)
	if len(got) != n || got[n-1] != (allocator.PoolID{B: n}) {
		t.Fatalf("%d misplaced, the last %v; want %d, the last pool %d", len(got), got[len(got)-1], n, n)
	}
	if bound := n * 2 * bits.Len(n); scanWork.Load()-w > int64(bound) {
		t.Fatalf("misplaced of %d segments: work %d, more than %d", n, scanWork.Load()-w, bound)
	}
}

// TestSandwichedWork: each release costs O(log n) of the n fresh allocs,
// and a run of m releases O(m), whatever their order.
func TestSandwichedWork(t *testing.T) {
	const n = 4096
	var fresh []replay.FreshAlloc
	var evs []trace.Event
	for i := range n {
		a := uint64(0x100000000) + uint64(i)*2<<20
		p := allocator.PoolID{}
		if i%2 == 0 {
			p = allocator.PoolID{B: uint64(1 + i%8)}
		}
		fresh = append(fresh, replay.FreshAlloc{Key: replay.AllocKey{TimeUs: int64(i), Addr: a}, Pool: p})
	}
	// One long run releasing them in order, then each alone, newest first.
	for i := range n {
		evs = append(evs, trace.Event{Kind: trace.KindSegmentFree, Addr: fresh[i].Key.Addr, TimeUs: n})
	}
	for i := n - 1; i >= 0; i-- {
		evs = append(evs, trace.Event{Kind: trace.KindAlloc, TimeUs: n + 1},
			trace.Event{Kind: trace.KindSegmentFree, Addr: fresh[i].Key.Addr, TimeUs: n + 1})
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	w := scanWork.Load()
	got, err := sandwiched(&torchsnap.Device{Events: evs}, fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n/2-1 { // every default one of the run but the last, after every pool's last release
		t.Fatalf("%d sandwiched, want %d", len(got), n/2-1)
	}
	if bound := 2 * n * 2 * bits.Len(n); scanWork.Load()-w > int64(bound) {
		t.Fatalf("sandwiched over %d releases: work %d, more than %d", 2*n, scanWork.Load()-w, bound)
	}
}

// TestScansMatch: misplaced and sandwiched give the answers of the scans
// they replaced on random inputs: overlapping dumped segments, allocs
// made at one address many times, times that go back.
func TestScansMatch(t *testing.T) {
	for seed := range int64(20) {
		rng := rand.New(rand.NewSource(seed))
		addr := func() uint64 { return uint64(0x100000 * (1 + rng.Intn(40))) }
		pool := func() allocator.PoolID {
			if rng.Intn(2) == 0 {
				return allocator.PoolID{}
			}
			return allocator.PoolID{B: uint64(1 + rng.Intn(4))}
		}
		// The model's segments are disjoint; the dump's need not be.
		d := &torchsnap.Device{}
		var segs []allocator.SegmentInfo
		for a := uint64(0x100000); a < 40*0x100000; a += 0x100000 {
			if rng.Intn(2) == 0 {
				segs = append(segs, allocator.SegmentInfo{Addr: a, Size: int64(0x100000 / (1 + rng.Intn(2))), Pool: pool()})
			}
		}
		rng.Shuffle(len(segs), func(i, j int) { segs[i], segs[j] = segs[j], segs[i] })
		for range 60 {
			d.Segments = append(d.Segments, torchsnap.Segment{Addr: addr() + uint64(rng.Intn(0x100000)), TotalSize: 0x1000, Pool: trace.PoolID{B: uint64(rng.Intn(2))}})
		}
		if got, want := misplaced(d, segs), misplacedScan(d, segs); !slices.Equal(got, want) {
			t.Fatalf("seed %d: misplaced %v, the scan %v", seed, got, want)
		}
		var fresh []replay.FreshAlloc
		for i := range 300 {
			ts := int64(i)
			if rng.Intn(10) == 0 {
				ts -= int64(rng.Intn(50))
			}
			fresh = append(fresh, replay.FreshAlloc{Key: replay.AllocKey{TimeUs: ts, Addr: addr()}, Pool: pool()})
		}
		var evs []trace.Event
		flips := map[replay.AllocKey]bool{}
		for i := range 400 {
			k := trace.KindSegmentFree
			if rng.Intn(6) == 0 {
				k = trace.KindAlloc
			}
			evs = append(evs, trace.Event{Seq: int64(i), Kind: k, Addr: addr(), TimeUs: int64(rng.Intn(320)), Stack: trace.NoStack})
			if rng.Intn(20) == 0 {
				flips[fresh[rng.Intn(len(fresh))].Key] = true
			}
		}
		dev := &torchsnap.Device{Events: evs}
		got, err := sandwiched(dev, fresh, flips)
		if err != nil {
			t.Fatal(err)
		}
		if want := sandwichedScan(evs, fresh, flips); !slices.Equal(got, want) {
			t.Fatalf("seed %d: sandwiched %v, the scan %v", seed, got, want)
		}
		if len(got) == 0 {
			t.Fatalf("seed %d: nothing sandwiched: the input tests little", seed)
		}
	}
}

// misplacedScan is misplaced as a scan of segs for each dumped segment.
func misplacedScan(d *torchsnap.Device, segs []allocator.SegmentInfo) []allocator.PoolID {
	var out []allocator.PoolID
	for _, ds := range d.Segments {
		if !ds.Pool.IsDefault() {
			continue
		}
		for _, s := range segs {
			if !s.Pool.IsDefault() && ds.Addr >= s.Addr && ds.Addr < s.Addr+uint64(s.Size) {
				out = append(out, s.Pool)
				break
			}
		}
	}
	return out
}

// sandwichedScan is sandwiched as scans: of fresh from its end for each
// release, and of each run for each release in it.
func sandwichedScan(evs []trace.Event, fresh []replay.FreshAlloc, flips map[replay.AllocKey]bool) []replay.AllocKey {
	type release struct {
		key  replay.AllocKey
		pool allocator.PoolID
	}
	var out []replay.AllocKey
	var run []release
	settle := func() {
		for j, r := range run {
			if !r.pool.IsDefault() || flips[r.key] {
				continue
			}
			for i := range j {
				p := run[i].pool
				if !p.IsDefault() && slices.ContainsFunc(run[j+1:], func(x release) bool { return x.pool == p }) {
					out = append(out, r.key)
					break
				}
			}
		}
		run = run[:0]
	}
	for _, ev := range evs {
		if ev.Kind != trace.KindSegmentFree {
			settle()
			continue
		}
		for i := len(fresh) - 1; i >= 0; i-- {
			if f := fresh[i]; f.Key.Addr == ev.Addr && f.Key.TimeUs <= ev.TimeUs {
				run = append(run, release{f.Key, f.Pool})
				break
			}
		}
	}
	settle()
	return out
}
