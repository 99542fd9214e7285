package allocator

import (
	"math/rand"
	"slices"
	"testing"
)

// TestProcessEventsOrder checks that ProcessEvents frees the blocks whose
// events completed in the order they were freed, whatever the order of
// completion: blocks a Restore made pending (which pendAt does not know
// yet) come first, in their order, then the frees that follow, through
// batches of completions, new frees between them, the compactions of
// pending, and a Reset.
func TestProcessEventsOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	a, err := New(DefaultConf(), NewSimDevice(gib))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		base := uint64(1) << 40
		const restored = 40
		var blocks []BlockInfo
		var pending []uint64 // the reference: pending blocks in free order
		for i := range restored {
			st := ActiveAllocated
			if i%4 != 0 {
				st = ActivePendingFree
				pending = append(pending, base+uint64(i)*512)
			}
			blocks = append(blocks, BlockInfo{Addr: base + uint64(i)*512, Size: 512, Requested: 512, State: st})
		}
		if err := a.Restore([]SegmentInfo{{Addr: base, Size: 2 << 20, Small: true, Blocks: append(blocks,
			BlockInfo{Addr: base + restored*512, Size: 2<<20 - restored*512, State: Inactive})}}); err != nil {
			t.Fatal(err)
		}
		var got []uint64
		a.SetObserver(ObserverFunc(func(e *Event) {
			if e.Action == ActFreeCompleted {
				got = append(got, e.Addr)
			}
		}))
		for step := range 300 {
			for range rng.Intn(8) { // new pending frees
				x, err := a.Malloc(512, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := a.RecordStream(x, 1); err != nil {
					t.Fatal(err)
				}
				if err := a.Free(x); err != nil {
					t.Fatal(err)
				}
				pending = append(pending, x)
			}
			// Complete a random few, in random order.
			done := map[uint64]bool{}
			for range rng.Intn(min(len(pending), 10) + 1) {
				x := pending[rng.Intn(len(pending))]
				a.MarkEventsDone(x)
				done[x] = true
			}
			got = got[:0]
			a.ProcessEvents()
			var want []uint64
			pending = slices.DeleteFunc(pending, func(x uint64) bool {
				if done[x] {
					want = append(want, x)
				}
				return done[x]
			})
			if !slices.Equal(got, want) {
				t.Fatalf("round %d step %d: freed %#x, want %#x", round, step, got, want)
			}
			for _, x := range pending {
				if !a.Pending(x) {
					t.Fatalf("round %d step %d: %#x no longer pending", round, step, x)
				}
			}
			if err := a.CheckInvariants(); err != nil {
				t.Fatalf("round %d step %d: %v", round, step, err)
			}
		}
		a.SetObserver(nil)
		if err := a.Reset(DefaultConf(), NewSimDevice(gib)); err != nil {
			t.Fatal(err)
		}
	}
}
