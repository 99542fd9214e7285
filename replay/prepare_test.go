package replay

import (
	"context"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// TestPrepare: a Replayer prepared for a trace's blocks (Prepare, on
// another goroutine, then Prefault) replays it with the results and the
// events of a plain Run, and its Run allocates nearly nothing, where a
// plain one allocates the arena and the table of numbered blocks.
func TestPrepare(t *testing.T) {
	const n = 100_000
	evs := make([]trace.Event, 0, n+n/4096+1)
	for i := range n {
		addr := uint64(1)<<40 + uint64(i)*512
		if i%4096 == 0 {
			evs = append(evs, trace.Event{Kind: trace.KindSegmentAlloc, Addr: addr, Size: 2 << 20, Stack: trace.NoStack})
		}
		evs = append(evs, trace.Event{Kind: trace.KindAlloc, Addr: addr, Size: 512, Stack: trace.NoStack})
	}
	for i := range evs {
		evs[i].Seq = int64(i)
	}
	var nums BlockNumbers
	nums.Number(evs)
	opts := Options{Conf: allocator.DefaultConf(), Recorded: true, Numbered: true, Blocks: n}
	run := func(rp *Replayer, observe bool) ([]DeviceResult, []trace.Event, uint64) {
		var out []trace.Event
		var obs Observer
		if observe {
			obs = ObserverFunc(func(ev *trace.Event) { out = append(out, *ev) })
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var res *Result
		var err error
		if rp != nil {
			res, err = rp.Run(context.Background(), NewSliceSource(evs), opts, obs)
		} else {
			res, err = Run(context.Background(), NewSliceSource(evs), opts, obs)
		}
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		devs := slices.Clone(res.Devices)
		for i := range devs {
			devs[i].Allocator = nil
		}
		return devs, out, after.TotalAlloc - before.TotalAlloc
	}
	want, wantEvs, _ := run(nil, true)
	_, _, plain := run(nil, false)
	rp := new(Replayer)
	done := make(chan error)
	go func() {
		err := rp.Prepare(opts)
		if !rp.Prefault(1) {
			t.Log("Prefault: not on this system")
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, _, prepared := run(rp, false) // the allocations of the Run alone
	if err := rp.Prepare(opts); err != nil {
		t.Fatal(err)
	}
	got, gotEvs, _ := run(rp, true)
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotEvs, wantEvs) {
		t.Error("the prepared Replayer's results or events differ from a plain Run's")
	}
	t.Logf("%d blocks: the plain Run allocated %d bytes, the prepared one %d", n, plain, prepared)
	if prepared*50 > plain {
		t.Errorf("the prepared Run allocated %d bytes, the plain one %d: want a fiftieth at most", prepared, plain)
	}
}

// TestPrefaultBelow: the memory of block numbers below n is the arena's
// first n blocks and the table's first n slots, however much longer the
// table is than the arena's blocks asked for (numbered in four parts,
// PartNumbers.Refs is about 1.125 times the blocks): with the arena
// faulted in by the table's share, a ninth of the blocks the model
// reached were faulted in on its thread.
func TestPrefaultBelow(t *testing.T) {
	const n = 400_000
	var rp Replayer
	refs := NewPartNumbers(4, false).Refs(n)
	if err := rp.Prepare(Options{Conf: allocator.DefaultConf(), Blocks: n, Refs: refs}); err != nil {
		t.Fatal(err)
	}
	for _, below := range []int{n / 4, n / 2, n} {
		if !rp.PrefaultBelow(below) {
			t.Skip("MADV_POPULATE_WRITE: not on this kernel")
		}
		for _, m := range []struct {
			name  string
			pages grow.Pages
		}{{"arena", rp.arena}, {"table", rp.table}} {
			got, ok := m.pages.Resident(0, below)
			if !ok {
				t.Skip("mincore failed")
			}
			m.pages.Populate(0, below) // all of them, to count them
			if want, _ := m.pages.Resident(0, below); got < want {
				t.Errorf("PrefaultBelow(%d): %d of the %d pages of the %s's first %d resident", below, got, want, m.name, below)
			}
		}
	}
}

// TestPartNumbersPrefault: after Reserve and Prefault, every page of each
// part's table of live addresses is resident, so that numbering faults on
// none of them (the seed's annotation at full scale: 12k faults on each
// part's thread, the tables filled in hash order).
func TestPartNumbersPrefault(t *testing.T) {
	n := NewPartNumbers(4, false)
	defer n.Close()
	n.Reserve(3, 400_000)
	if !n.Prefault(3) {
		t.Skip("MADV_POPULATE_WRITE: not on this kernel")
	}
	for i, x := range n.parts {
		pages := x.nums.device(3).at.Pages()
		got, ok := pages.Resident(0, pages.Len())
		if !ok {
			t.Skip("mincore failed")
		}
		pages.Populate(0, pages.Len()) // all of them, to count them
		if want, _ := pages.Resident(0, pages.Len()); got < want || want == 0 {
			t.Errorf("part %d: %d of its table's %d pages resident", i, got, want)
		}
	}
}

// TestReleaseBehind: Release drops the prepared memory from the Replayer
// at once and hands its unmapping to a goroutine (unmapBehind), so that a
// caller's path does not wait for its pages to be freed: the OffHeap it
// hands on is still mapped when Release returns. It fails if Release
// unmaps on the caller's goroutine.
func TestReleaseBehind(t *testing.T) {
	var handed []*grow.OffHeap
	defer func(f func(*grow.OffHeap)) { unmapBehind = f }(unmapBehind)
	unmapBehind = func(h *grow.OffHeap) { handed = append(handed, h) }
	var rp Replayer
	o := Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 40, Blocks: 50_000}
	if err := rp.PrepareOffHeap(o); err != nil {
		t.Fatal(err)
	}
	rp.Prefault(1)
	if _, err := rp.Run(context.Background(), newGenSource(20_000), o, nil); err != nil {
		t.Fatal(err)
	}
	rp.Release()
	if len(handed) != 1 || handed[0].Mapped() == 0 {
		t.Fatalf("%d OffHeaps handed to be unmapped behind, want 1 still mapped", len(handed))
	}
	handed[0].Release()
	if rp.off != nil || rp.x.dev0.a != nil {
		t.Error("the Replayer still holds the released memory")
	}
	// It replays again, afresh.
	if _, err := rp.Run(context.Background(), newGenSource(20_000), o, nil); err != nil {
		t.Fatal(err)
	}
}
