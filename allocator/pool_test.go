package allocator

import (
	"math/rand"
	"testing"
)

// TestFits: Fits says whether a malloc routed to a pool would reuse a cached
// block of that pool on that stream, and changes nothing.
func TestFits(t *testing.T) {
	h := newHarness(t, "", 80*gib)
	pool := PoolID{A: 1}
	h.free(h.malloc(4 * mib)) // a cached 20 MiB segment in the default pool
	before := h.a.Stats()
	for _, c := range []struct {
		id     PoolID
		size   int64
		stream uint64
		want   bool
	}{
		{PoolID{}, 4 * mib, 0, true},
		{PoolID{}, 20 * mib, 0, true},
		{PoolID{}, 22 * mib, 0, false}, // larger than the block
		{PoolID{}, 4 * mib, 1, false},  // another stream's
		{PoolID{}, 4096, 0, false},     // the small pool has nothing
		{pool, 4 * mib, 0, false},      // no such pool
	} {
		if got := h.a.Fits(c.id, c.size, c.stream); got != c.want {
			t.Errorf("Fits(%v, %d, %d) = %v, want %v", c.id, c.size, c.stream, got, c.want)
		}
	}
	h.check()
	if after := h.a.Stats(); after != before {
		t.Errorf("Fits changed the stats: %+v, then %+v", before, after)
	}
	h.a.BeginAllocateToPool(pool, nil)
	h.free(h.malloc(4 * mib))
	h.a.EndAllocateToPool(pool)
	if !h.a.Fits(pool, 4*mib, 0) {
		t.Error("the private pool's cached block does not fit")
	}
}

// TestInUse: a pool is in use from BeginAllocateToPool until ReleasePool
// drops its last use; EmptyCache then deletes it with its segments.
func TestInUse(t *testing.T) {
	h := newHarness(t, "", 80*gib)
	pool := PoolID{B: 1}
	if h.a.InUse(pool) {
		t.Fatal("a pool never made is in use")
	}
	h.a.BeginAllocateToPool(pool, nil)
	h.free(h.malloc(4 * mib))
	h.a.EndAllocateToPool(pool)
	if !h.a.InUse(pool) {
		t.Fatal("the pool is not in use after its first capture")
	}
	h.a.ReleasePool(pool)
	if h.a.InUse(pool) {
		t.Fatal("the pool is in use after its release")
	}
	if err := h.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if n := len(h.a.Segments()); n != 0 || h.a.Fits(pool, 4*mib, 0) {
		t.Errorf("%d segments after empty_cache; the released pool still fits a block: %v", n, h.a.Fits(pool, 4*mib, 0))
	}
}

// TestExpandableOwner: with expandable segments, the pool of a reserved
// range is known by any address in it, mapped or not, and a pool has a
// segment per stream and size class.
func TestExpandableOwner(t *testing.T) {
	h := newHarness(t, "expandable_segments:True", 80*gib)
	pool := PoolID{A: 3}
	d := h.malloc(4 * mib)
	h.a.BeginAllocateToPool(pool, nil)
	p := h.malloc(4 * mib)
	h.a.EndAllocateToPool(pool)
	for _, c := range []struct {
		addr uint64
		want PoolID
	}{{d, PoolID{}}, {p, pool}, {p + 100*mib, pool}} {
		if got, ok := h.a.ExpandableOwner(c.addr); !ok || got != c.want {
			t.Errorf("ExpandableOwner(%#x) = %v, %v; want %v", c.addr, got, ok, c.want)
		}
	}
	if _, ok := h.a.ExpandableOwner(1 << 20); ok {
		t.Error("an address outside every segment has an owner")
	}
	for _, c := range []struct {
		id     PoolID
		size   int64
		stream uint64
		want   bool
	}{
		{pool, 4 * mib, 0, true},
		{PoolID{}, 30 * mib, 0, true},
		{pool, 4096, 0, false}, // no small segment
		{pool, 4 * mib, 1, false},
		{PoolID{A: 4}, 4 * mib, 0, false},
	} {
		if got := h.a.HasExpandable(c.id, c.size, c.stream); got != c.want {
			t.Errorf("HasExpandable(%v, %d, %d) = %v, want %v", c.id, c.size, c.stream, got, c.want)
		}
	}
}

// TestEmptyPoolCache_sync: the empty_cache of one private pool (a MemPool's
// destruction) syncs, and counts in num_sync_all_streams, only when the pool
// is freeable, and returns that pool's segments alone.
func TestEmptyPoolCache_sync(t *testing.T) {
	h := newHarness(t, "", 80*gib)
	pool := PoolID{B: 1}
	h.free(h.malloc(4 * mib)) // a cached default segment
	h.a.BeginAllocateToPool(pool, nil)
	h.free(h.malloc(4 * mib))
	h.a.EndAllocateToPool(pool)
	if err := h.a.EmptyPoolCache(pool); err != nil {
		t.Fatal(err)
	}
	h.stats(map[string]int64{"num_sync_all_streams": 0, "segment.all.current": 2})
	h.a.ReleasePool(pool)
	if err := h.a.EmptyPoolCache(pool); err != nil {
		t.Fatal(err)
	}
	h.check()
	h.stats(map[string]int64{"num_sync_all_streams": 1, "segment.all.current": 1, "num_device_free": 1})
	if err := h.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	h.stats(map[string]int64{"num_sync_all_streams": 2, "segment.all.current": 0})
}

// TestFitsUpTo: outside expandable segments and max_split_size_mb, Fits
// of a request is exactly whether its rounded size is at most FitsUpTo of
// its class, for the default pools and a private pool, on every stream,
// at every point of a random run of mallocs and frees.
func TestFitsUpTo(t *testing.T) {
	a, err := New(DefaultConf(), NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	size := func() int64 {
		if rng.Intn(2) == 0 {
			return int64(1 + rng.Intn(mib))
		}
		return int64(1 + rng.Intn(30*mib))
	}
	pools := []PoolID{{}, {B: 1}}
	a.BeginAllocateToPool(pools[1], func(s uint64) bool { return s == 1 })
	var live []uint64
	checked := [2]int{}
	for step := range 4000 {
		if rng.Intn(3) != 0 || len(live) == 0 {
			addr, err := a.Malloc(size(), uint64(rng.Intn(3)))
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, addr)
		} else {
			i := rng.Intn(len(live))
			if err := a.Free(live[i]); err != nil {
				t.Fatal(err)
			}
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		for range 4 {
			id, st, n := pools[rng.Intn(2)], uint64(rng.Intn(3)), size()
			r := a.conf.roundSize(n)
			bound, ok := a.FitsUpTo(id, r <= a.conf.SmallSize, st)
			if !ok {
				t.Fatalf("step %d: FitsUpTo undecided under the default settings", step)
			}
			fits := a.Fits(id, n, st)
			if fits != (r <= bound) {
				t.Fatalf("step %d: pool %v stream %d size %d: Fits %v, FitsUpTo %d", step, id, st, n, fits, bound)
			}
			checked[b2i(fits)]++
		}
	}
	if checked[0] < 100 || checked[1] < 100 {
		t.Fatalf("%d requests fit, %d did not: too few of one kind", checked[1], checked[0])
	}
	// Two free blocks in one size class, 16 MiB and 16 MiB + 128 KiB: the
	// bound is the larger.
	d, err := New(DefaultConf(), NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	var addrs [3]uint64
	for i, n := range []int64{4 * mib, 16 * mib, 4*mib - 128*kib} {
		if addrs[i], err = d.Malloc(n, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Free(addrs[1]); err != nil {
		t.Fatal(err)
	}
	if bound, _ := d.FitsUpTo(PoolID{}, false, 0); bound != 16*mib+128*kib || !d.Fits(PoolID{}, 16*mib+64*kib, 0) {
		t.Fatalf("FitsUpTo %d, want %d", bound, 16*mib+128*kib)
	}
	c := DefaultConf()
	c.MaxSplitSize = 200 * mib
	b, err := New(c, NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.FitsUpTo(PoolID{}, false, 0); ok {
		t.Fatal("FitsUpTo decided under max_split_size_mb")
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
