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
		a, err := New(DefaultConf(), NewSimDevice(1<<40))
		if err != nil {
			t.Fatal(err)
		}
		addrs := make([]uint64, n)
		for i := range addrs {
			addrs[i] = mustMalloc(t, a, 512, 0)
		}
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
