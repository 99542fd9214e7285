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
