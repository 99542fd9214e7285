package record

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// memPoolFirst is a torch.cuda.MemPool whose first allocation comes before
// any default-pool one, as in testdata/pairs' mempool program: a (the
// MemPool's) is inferred to the default pools, no pool having had room;
// b is the default pools'; c is made although b had room (the MemPool's).
// Once a and b's blocks are free, a 20 MiB request reuses a: the default
// pools would have taken b's 20 MiB block, so a was never theirs.
func memPoolFirst() []trace.Event {
	const mib = 1 << 20
	const a, b, c = 0x10000000, 0x20000000, 0x30000000
	evs := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: a, Size: 26 * mib},
		{Kind: trace.KindAlloc, Addr: a, Size: 25 * mib},
		{Kind: trace.KindSegmentAlloc, Addr: b, Size: 20 * mib},
		{Kind: trace.KindAlloc, Addr: b, Size: 3 * mib},
		{Kind: trace.KindSegmentAlloc, Addr: c, Size: 18 * mib},
		{Kind: trace.KindAlloc, Addr: c, Size: 17 * mib},
		{Kind: trace.KindFreeRequested, Addr: a, Size: 25 * mib},
		{Kind: trace.KindFreeCompleted, Addr: a, Size: 25 * mib},
		{Kind: trace.KindFreeRequested, Addr: b, Size: 3 * mib},
		{Kind: trace.KindFreeCompleted, Addr: b, Size: 3 * mib},
		{Kind: trace.KindAlloc, Addr: a, Size: 20 * mib},
		{Kind: trace.KindFreeRequested, Addr: a, Size: 20 * mib},
		{Kind: trace.KindFreeCompleted, Addr: a, Size: 20 * mib},
		{Kind: trace.KindSegmentFree, Addr: b, Size: 20 * mib},
	}
	for i := range evs {
		evs[i].Seq, evs[i].TimeUs, evs[i].Stack = int64(i), int64(100+i), trace.NoStack
	}
	return evs
}

// TestDecidePools_memPoolFirst: decidePools flips a's pool, and the model
// then follows the recording, which it leaves without the flip.
func TestDecidePools_memPoolFirst(t *testing.T) {
	evs := memPoolFirst()
	dev := &torchsnap.Device{Events: evs}
	last := int64(len(evs) - 1)
	_, end, err := findEmptyCaches(allocator.DefaultConf(), inference{pools: true}, 0, 0, nil, dev, last, privateSegments(dev), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !end.left || end.ev.Seq != 10 {
		t.Fatalf("without flips the model leaves at %+v, want the reuse of a (seq 10)", end)
	}
	_, flips, err := decidePools(allocator.DefaultConf(), inference{pools: true}, 0, 0, nil, dev, last, privateSegments(dev))
	if err != nil {
		t.Fatal(err)
	}
	if want := (replay.AllocKey{TimeUs: 101, Addr: 0x10000000}); len(flips) != 1 || !flips[want] {
		t.Fatalf("flips %v, want a's alloc %v", flips, want)
	}
	if _, end, err = findEmptyCaches(allocator.DefaultConf(), inference{pools: true}, 0, 0, nil, dev, last, privateSegments(dev), flips); err != nil || end.left {
		t.Errorf("with the flips the model leaves at %+v (%v)", end, err)
	}
}

// TestDecidePools_noPool: a recording the model leaves with no private pool
// met gets no flips, though flipping a's pool would have the model follow
// it: the model left it for another reason (garbage collection under a
// limit it does not know, say), not for a pool.
func TestDecidePools_noPool(t *testing.T) {
	const mib = 1 << 20
	evs := append(memPoolFirst()[:4],
		trace.Event{Kind: trace.KindFreeRequested, Addr: 0x10000000, Size: 25 * mib},
		trace.Event{Kind: trace.KindFreeCompleted, Addr: 0x10000000, Size: 25 * mib},
		trace.Event{Kind: trace.KindAlloc, Addr: 0x10000000, Size: 17 * mib})
	for i := range evs {
		evs[i].Seq, evs[i].TimeUs, evs[i].Stack = int64(i), int64(100+i), trace.NoStack
	}
	dev := &torchsnap.Device{Events: evs}
	last := int64(len(evs) - 1)
	if _, end, err := findEmptyCaches(allocator.DefaultConf(), inference{pools: true}, 0, 0, nil, dev, last, privateSegments(dev), nil); err != nil || !end.left || end.pools != 0 {
		t.Fatalf("the model leaves at %+v (%v), want it to leave with no pool met", end, err)
	}
	_, flips, err := decidePools(allocator.DefaultConf(), inference{pools: true}, 0, 0, nil, dev, last, privateSegments(dev))
	if err != nil {
		t.Fatal(err)
	}
	if flips != nil {
		t.Errorf("flips %v, want none", flips)
	}
}

// TestSegmentMakers: the alloc right after a segment_alloc made it; a
// segment freed before is forgotten.
func TestSegmentMakers(t *testing.T) {
	evs := memPoolFirst()
	dev := &torchsnap.Device{Events: evs}
	got, err := segmentMakers(dev, 10, 0x10000000+(21<<20), 0x20000000, 0x40000000)
	if err != nil {
		t.Fatal(err)
	}
	want := []replay.AllocKey{{TimeUs: 101, Addr: 0x10000000}, {TimeUs: 103, Addr: 0x20000000}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("makers %v, want %v", got, want)
	}
	if got, _ := segmentMakers(dev, 14, 0x20000000); len(got) != 0 {
		t.Errorf("makers of a freed segment %v, want none", got)
	}
}

// TestSwapCandidate: the swap flips the first default-pool alloc that made
// a segment on the pool's stream before the pool's first one, not yet
// flipped.
func TestSwapCandidate(t *testing.T) {
	p := allocator.PoolID{B: 1}
	k := func(i int64) replay.AllocKey { return replay.AllocKey{TimeUs: i, Addr: 0x1000} }
	fresh := []replay.FreshAlloc{
		{Key: k(1), Stream: 7},
		{Key: k(2)},
		{Key: k(3)},
		{Key: k(4), Pool: p},
		{Key: k(5)},
	}
	if got, ok := swapCandidate(fresh, p, nil); !ok || got != k(2) {
		t.Errorf("candidate %v %v, want %v", got, ok, k(2))
	}
	if got, ok := swapCandidate(fresh, p, map[replay.AllocKey]bool{k(2): true}); !ok || got != k(3) {
		t.Errorf("with %v flipped: candidate %v %v, want %v", k(2), got, ok, k(3))
	}
	if _, ok := swapCandidate(fresh, allocator.PoolID{B: 2}, nil); ok {
		t.Error("a candidate for a pool that made no segment")
	}
}

// TestImport_memPoolExpandable: the pairs' mempool run under expandable
// segments, imported and replayed under its settings, ends with the
// segments it dumped in the default pools: the MemPool's first
// reservation, inferred to the default pools, would otherwise have made
// the default pools' reservation a MemPool's.
func TestImport_memPoolExpandable(t *testing.T) {
	evs := importPair(t, "mempool__expandable")
	conf, err := allocator.ParseConf("expandable_segments:True")
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.Run(context.Background(), replay.NewSliceSource(evs), replay.Options{Conf: conf, EmptyCacheRows: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	segs := res.Devices[0].Allocator.Segments()
	if len(segs) == 0 {
		t.Fatal("no segments at the end")
	}
	for _, s := range segs {
		if !s.Pool.IsDefault() {
			t.Errorf("segment of %d bytes at the end in pool %v, want the default pools (the dump's)", s.Size, s.Pool)
		}
	}
}

// TestSandwiched: in a run of releases, a default-pool segment released
// between two of pool p's is p's; one released after them, or in another
// run, is not.
func TestSandwiched(t *testing.T) {
	p := allocator.PoolID{B: 1}
	k := func(i int64, addr uint64) replay.AllocKey { return replay.AllocKey{TimeUs: i, Addr: addr} }
	fresh := []replay.FreshAlloc{
		{Key: k(1, 0x1000), Pool: p},
		{Key: k(2, 0x2000)},
		{Key: k(3, 0x3000), Pool: p},
		{Key: k(4, 0x4000)},
		{Key: k(5, 0x5000)},
	}
	evs := []trace.Event{
		{Kind: trace.KindSegmentFree, Addr: 0x5000, TimeUs: 9},
		{Kind: trace.KindAlloc, Addr: 0x6000, TimeUs: 10},
		{Kind: trace.KindSegmentFree, Addr: 0x1000, TimeUs: 11},
		{Kind: trace.KindSegmentFree, Addr: 0x2000, TimeUs: 12},
		{Kind: trace.KindSegmentFree, Addr: 0x3000, TimeUs: 13},
		{Kind: trace.KindSegmentFree, Addr: 0x4000, TimeUs: 14},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	dev := &torchsnap.Device{Events: evs}
	got, err := sandwiched(dev, fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != k(2, 0x2000) {
		t.Errorf("sandwiched %v, want [%v]", got, k(2, 0x2000))
	}
	if got, _ := sandwiched(dev, fresh, map[replay.AllocKey]bool{k(2, 0x2000): true}); len(got) != 0 {
		t.Errorf("sandwiched %v once flipped, want none", got)
	}
}

// TestImport_memPoolReleased: the pairs' mempool run under defaults
// imports with every allocation of the MemPool (every third of the first
// forty, and the small ones after) in one private pool and the rest in the
// default pools, as the program made them.
func TestImport_memPoolReleased(t *testing.T) {
	checkMemPoolAllocs(t, importPair(t, "mempool__default"))
}

// checkMemPoolAllocs checks the allocations of the pairs' mempool program
// in evs: every third of the first forty, and all after, in one private
// pool (returned), the rest in the default pools.
func checkMemPoolAllocs(t *testing.T, evs []trace.Event) trace.PoolID {
	t.Helper()
	var pool trace.PoolID
	i := 0
	for _, ev := range evs {
		if ev.Kind != trace.KindAlloc {
			continue
		}
		in := i >= 40 || i%3 == 0
		if in && pool.IsDefault() {
			pool = ev.Pool
		}
		switch {
		case in && (ev.Pool != pool || pool.IsDefault()):
			t.Errorf("allocation %d (%d bytes) in pool %v, want the MemPool %v", i, ev.Size, ev.Pool, pool)
		case !in && !ev.Pool.IsDefault():
			t.Errorf("allocation %d (%d bytes) in pool %v, want the default pools", i, ev.Size, ev.Pool)
		}
		i++
	}
	return pool
}

// importPair imports testdata/pairs' snapshot name and returns its events.
func importPair(t *testing.T, name string) []trace.Event {
	t.Helper()
	evs, _ := importPairWith(t, name, ImportOptions{})
	return evs
}

// importPairWith is importPair with opts, and also returns the import's result.
func importPairWith(t *testing.T, name string, opts ImportOptions) ([]trace.Event, *ImportResult) {
	t.Helper()
	in := gunzipPair(t, name)
	out := filepath.Join(t.TempDir(), name+".arrows")
	res, err := importOne(context.Background(), in, out, opts)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var evs []trace.Event
	for rd.Next() {
		evs = append(evs, *rd.Event())
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return evs, res
}

// gunzipPair writes testdata/pairs' snapshot name, unzipped, to a
// temporary file and returns its path.
func gunzipPair(t *testing.T, name string) string {
	t.Helper()
	in := filepath.Join(t.TempDir(), name+".pickle")
	gz, err := os.Open("../testdata/pairs/snapshots/" + name + ".pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestImport_memPoolSearch: the pairs' mempool run under
// roundup_power2_divisions:4 imports with the model following it to the
// end. There the flip that takes the model furthest at the first
// disagreement (a default-pool segment's) is wrong; the search comes back
// to the other (the MemPool's first segment).
func TestImport_memPoolSearch(t *testing.T) {
	in := gunzipPair(t, "mempool__pow2div4")
	res, err := importOne(context.Background(), in, filepath.Join(t.TempDir(), "out.arrows"), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Diverged {
		t.Errorf("the model leaves the recording: %v", d)
	}
}
