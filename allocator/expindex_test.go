package allocator

import (
	"testing"
)

// TestWork_expandableOwner: 16,384 expandable reservations (one per
// stream), made and released in ascending, descending and random order;
// ExpandableOwner and HasExpandable on each must visit O(log n) nodes and
// answer as a scan of every reservation would.
func TestWork_expandableOwner(t *testing.T) {
	const n = 1 << 14
	conf := DefaultConf()
	conf.ExpandableSegments = true
	for _, order := range workOrders {
		t.Run(order, func(t *testing.T) {
			a, err := New(conf, NewSimDevice(1<<40))
			if err != nil {
				t.Fatal(err)
			}
			perm := workPerm(n, order)
			addrs := make([]uint64, n)
			bound := workBound(n)
			for _, j := range perm {
				if addrs[j], err = a.Malloc(4<<20, uint64(j+1)); err != nil {
					t.Fatal(err)
				}
			}
			if len(a.exps) != n {
				t.Fatalf("%d reservations, want %d", len(a.exps), n)
			}
			for i, j := range perm {
				opWork(t, "owner", i, bound, func() {
					if _, ok := a.ExpandableOwner(addrs[j]); !ok {
						t.Fatalf("no reservation holds %#x", addrs[j])
					}
				})
				if got, want := a.HasExpandable(PoolID{}, 4<<20, uint64(j+1)), a.scanHasExpandable(PoolID{}, false, uint64(j+1)); got != want || !got {
					t.Fatalf("stream %d: HasExpandable %v, a scan says %v", j+1, got, want)
				}
				if a.HasExpandable(PoolID{}, 512, uint64(j+1)) {
					t.Fatalf("stream %d has no small reservation", j+1)
				}
			}
			if _, ok := a.ExpandableOwner(0); ok {
				t.Error("address 0 is in a reservation")
			}
			// The control: the scan the index replaced passes the bound.
			w := work()
			a.scanHasExpandable(PoolID{}, true, 1)
			if d := work() - w; d <= bound {
				t.Errorf("a scan of %d reservations did %d work, not more than %d", n, d, bound)
			}
			for _, j := range perm {
				if err := a.Free(addrs[j]); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if len(a.exps) != 0 || a.expIx.byBase.Len() != 0 || len(a.expIx.uses) != 0 {
				t.Fatalf("after empty_cache: %d reservations, %d indexed, %d uses", len(a.exps), a.expIx.byBase.Len(), len(a.expIx.uses))
			}
			for _, x := range addrs {
				if _, ok := a.ExpandableOwner(x); ok {
					t.Fatalf("%#x still in a reservation after empty_cache", x)
				}
			}
		})
	}
}

// scanHasExpandable is HasExpandable by a scan of every reservation, as
// it was before the index: the answer the index must give, and the work
// (flatWork) it did.
func (a *Allocator) scanHasExpandable(id PoolID, small bool, stream uint64) bool {
	for _, e := range a.exps {
		flatWork++
		if e.stream == stream && e.pool.small == small && e.pool.id() == id {
			return true
		}
	}
	return false
}
