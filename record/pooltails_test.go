package record

import (
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// TestPoolTails: default-pool releases that end a run after MemPool p's
// last, each after the one before in (stream, size, address), are p's, and
// a call of no bytes after the run keeps the empty_cache() the run showed;
// a tail out of that order (an empty_cache() releasing the default pools'
// own segments, large then small), one after a graph pool's, or one
// flipped already, is not.
func TestPoolTails(t *testing.T) {
	p, g := allocator.PoolID{B: 1}, allocator.PoolID{A: 1}
	k := func(i int64, addr uint64) replay.AllocKey { return replay.AllocKey{TimeUs: i, Addr: addr} }
	fresh := []replay.FreshAlloc{
		{Key: k(1, 0x1000), Pool: p},
		{Key: k(2, 0x2000), Pool: p},
		{Key: k(3, 0x3000)},
		{Key: k(4, 0x4000)},
		{Key: k(5, 0x5000), Pool: p},
		{Key: k(6, 0x6000)},
		{Key: k(7, 0x7000)},
		{Key: k(8, 0x8000), Pool: g},
		{Key: k(9, 0x9000)},
	}
	free := func(addr uint64, size int64) trace.Event {
		return trace.Event{Kind: trace.KindSegmentFree, Addr: addr, Size: size, TimeUs: 20}
	}
	evs := []trace.Event{
		free(0x1000, 2<<20), free(0x2000, 20<<20), free(0x3000, 20<<20), free(0x4000, 40<<20), // p's, in order
		{Kind: trace.KindAlloc, Addr: 0xa000, TimeUs: 20},
		free(0x5000, 20<<20), free(0x6000, 40<<20), free(0x7000, 2<<20), // a small one after: the default pools'
		{Kind: trace.KindAlloc, Addr: 0xb000, TimeUs: 20},
		free(0x8000, 20<<20), free(0x9000, 40<<20), // after a graph pool's
	}
	for i := range evs {
		evs[i].Seq, evs[i].Stack = int64(i), trace.NoStack
	}
	dev := &torchsnap.Device{Events: evs}
	keys, calls, err := poolTails(dev, fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []replay.AllocKey{k(3, 0x3000), k(4, 0x4000)}; !slices.Equal(keys, want) {
		t.Errorf("poolTails %v, want %v", keys, want)
	}
	if len(calls) != 1 || calls[0].Seq != 4 || calls[0].Kind != trace.KindEmptyCache || calls[0].Size != 0 {
		t.Errorf("calls %v, want one empty_cache row of 0 bytes at seq 4", calls)
	}
	if keys, calls, _ := poolTails(dev, fresh, map[replay.AllocKey]bool{k(4, 0x4000): true}); len(keys) != 0 || len(calls) != 0 {
		t.Errorf("poolTails %v, calls %v with the tail flipped, want none", keys, calls)
	}
	rows := []trace.Event{{Seq: 0, Size: 1}, {Seq: 4, Size: 2}, {Seq: 9, Size: 3}}
	got := mergeRows(rows, []trace.Event{{Seq: 9}, {Seq: 4}})
	if want := []int64{1, 0, 2, 0, 3}; !slices.Equal(sizes(got), want) {
		t.Errorf("merged rows of sizes %v, want %v", sizes(got), want)
	}
}

func sizes(evs []trace.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Size)
	}
	return out
}

// TestImport_memPoolGC: the pairs' mempool run under
// garbage_collection_threshold:0.6, with its limit, imports with every
// allocation of the MemPool in one private pool, as under defaults
// (TestImport_memPoolReleased), although garbage collection had released
// the default pools' block that tells the pool's last large allocation
// (47 MiB) from theirs: the pool's destruction released its segment with
// the pool's own. The trace ends with that release and then the
// empty_cache() the program made after it, which released nothing.
func TestImport_memPoolGC(t *testing.T) {
	evs, res := importPairWith(t, "mempool__gc60", ImportOptions{MemoryFraction: 0.008158935077352275, DeviceTotal: 150109880320})
	for _, d := range res.Diverged {
		t.Errorf("the model leaves the recording: %v", d)
	}
	pool := checkMemPoolAllocs(t, evs)
	n := len(evs)
	if n < 2 || evs[n-1].Kind != trace.KindEmptyCache || evs[n-1].Size != 0 || evs[n-2].Kind != trace.KindSegmentFree || evs[n-2].Pool != pool {
		t.Errorf("the trace ends with %v, %v; want the pool's last release, then an empty_cache row of 0 bytes", evs[max(n-2, 0)], evs[n-1])
	}
}
