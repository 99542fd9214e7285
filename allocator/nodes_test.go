package allocator

import (
	"reflect"
	"runtime"
	"testing"
)

// TestNodesAhead: blocks of one size freed every other one in ascending
// address order, the seed experiment's shape, go into one class's tree,
// whose nodes come from the slabs NodesAhead made (here between batches of
// frees, as the goroutine beside the import's annotation does): the frees
// themselves allocate next to nothing (the tree, and slices that grow by
// doubling), where each leaf and inner node was an allocation; and the state
// and statistics are those of a run without slabs.
func TestNodesAhead(t *testing.T) {
	const n, batch = 40_000, 2_000
	run := func(ahead bool) (*Allocator, uint64) {
		a, addrs := mallocMany(t, n)
		var ms runtime.MemStats
		mallocs := uint64(0)
		for lo := 0; lo < n; lo += 2 * batch {
			if ahead {
				a.NodesAhead()
			}
			runtime.ReadMemStats(&ms)
			before := ms.Mallocs
			for i := lo; i < min(n, lo+2*batch); i += 2 {
				mustFree(t, a, addrs[i])
			}
			runtime.ReadMemStats(&ms)
			mallocs += ms.Mallocs - before
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		return a, mallocs
	}
	plain, plainMallocs := run(false)
	a, mallocs := run(true)
	if mallocs > n/2/500 {
		t.Errorf("%d frees into one class allocated %d objects with nodes made ahead, want at most one per 500 frees (%d without)", n/2, mallocs, plainMallocs)
	}
	if plainMallocs < n/2/leafCap {
		t.Errorf("%d frees allocated %d objects without nodes made ahead: the test no longer makes a tree of many leaves", n/2, plainMallocs)
	}
	if !reflect.DeepEqual(a.Stats(), plain.Stats()) || !reflect.DeepEqual(a.Segments(), plain.Segments()) {
		t.Error("a run with nodes made ahead ends in other statistics or segments than a plain one's")
	}
}

// TestNodesAheadLate: one call of NodesAhead covers frees that take three
// slabs' leaves, as where the goroutine that calls it is late: the
// allocator takes the slabs it made together, and the frees allocate next
// to no nodes of their own.
func TestNodesAheadLate(t *testing.T) {
	n := 2 * 3 * slabLeaves * leafCap * 3 / 4 // every other block freed: three slabs of leaves split at 3/4
	a, addrs := mallocMany(t, n)
	a.NodesAhead()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.Mallocs
	for i := 0; i < n; i += 2 {
		mustFree(t, a, addrs[i])
	}
	runtime.ReadMemStats(&ms)
	// The tree's own slices, which grow by doubling, are the few left;
	// each leaf allocated (two slabs' worth: 128) would be one more.
	if got := ms.Mallocs - before; got > slabLeaves/2 {
		t.Errorf("%d frees after one NodesAhead allocated %d objects, want at most %d", n/2, got, slabLeaves/2)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// mallocMany returns a new allocator and the addresses of n blocks of 512
// bytes it allocated, in ascending order.
func mallocMany(t *testing.T, n int) (*Allocator, []uint64) {
	a, err := New(DefaultConf(), NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]uint64, n)
	for i := range addrs {
		addrs[i] = mustMalloc(t, a, 512, 0)
	}
	return a, addrs
}

// TestAheadLeaves: NodesAheadFor makes slabsAhead full slabs for an
// unknown or large number of blocks, as NodesAhead always did, and a
// leaf per minFill blocks for fewer; a tree that outgrows them takes
// nodes allocated one by one, and the run ends as a plain one does.
func TestAheadLeaves(t *testing.T) {
	most := slabsAhead * slabLeaves
	for _, c := range []struct{ blocks, want int }{
		{0, most}, {-1, most}, {1, 1}, {minFill, 1}, {minFill + 1, 2}, {60, 4},
		{most*minFill - 1, most}, {most * minFill, most}, {1 << 30, most},
	} {
		if got := aheadLeaves(c.blocks); got != c.want {
			t.Errorf("aheadLeaves(%d) = %d, want %d", c.blocks, got, c.want)
		}
	}
	slabs := func(blocks int) (n, leaves, inners int) {
		a, _ := mallocMany(t, 1)
		if blocks == 0 {
			a.NodesAhead()
		} else {
			a.NodesAheadFor(blocks)
		}
		for s := a.pages.nodes.ready.Load(); s != nil; s = s.next {
			n, leaves, inners = n+1, leaves+len(s.leaves), inners+len(s.inners)
		}
		return
	}
	if n, l, i := slabs(0); n != slabsAhead || l != most || i != slabsAhead*slabInners {
		t.Errorf("NodesAhead made %d slabs of %d leaves and %d inner nodes, want %d, %d, %d", n, l, i, slabsAhead, most, slabsAhead*slabInners)
	}
	if n, l, i := slabs(1 << 20); n != slabsAhead || l != most || i != slabsAhead*slabInners {
		t.Errorf("NodesAheadFor(1<<20) made %d slabs of %d leaves and %d inner nodes, want %d, %d, %d", n, l, i, slabsAhead, most, slabsAhead*slabInners)
	}
	if n, l, i := slabs(60); n != 1 || l != 4 || i != 1 {
		t.Errorf("NodesAheadFor(60) made %d slabs of %d leaves and %d inner nodes, want 1, 4, 1", n, l, i)
	}
	if _, l, _ := slabs(slabLeaves*minFill + 1); l != slabLeaves+1 {
		t.Errorf("NodesAheadFor(%d) made %d leaves, want %d", slabLeaves*minFill+1, l, slabLeaves+1)
	}

	const n = 20_000 // a tree of far more leaves than NodesAheadFor(60) makes
	run := func(ahead bool) *Allocator {
		a, addrs := mallocMany(t, n)
		if ahead {
			a.NodesAheadFor(60)
		}
		for i := 0; i < n; i += 2 {
			mustFree(t, a, addrs[i])
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		return a
	}
	plain, a := run(false), run(true)
	if !reflect.DeepEqual(a.Stats(), plain.Stats()) || !reflect.DeepEqual(a.Segments(), plain.Segments()) {
		t.Error("a run past the few nodes made ahead ends in other statistics or segments than a plain one's")
	}
}
