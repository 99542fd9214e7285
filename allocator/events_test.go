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

// TestCompleteLate checks a completion that comes within a malloc: under a
// limit, a pending 12 MiB block whose events complete while the next malloc
// of 11 MiB runs is not found by its search; the malloc retries, its
// synchronize frees the block (late ones first, in their order), and
// release_cached_blocks returns the segment before a new one is made, as
// PyTorch does (one retry, one synchronize). Without the limit the blocks
// are freed right after the failed search, before the new segment.
// Completed before the malloc instead (CompleteFree), the block serves it.
func TestCompleteLate(t *testing.T) {
	for _, c := range []struct {
		late    bool
		limit   int64
		want    string
		retries int64
	}{
		{true, 26 << 20, "free_completed +0 11534336; free_completed +12582912 524288; segment_free +0 12582912; " +
			"segment_free +12582912 2097152; segment_alloc +27262976 12582912; alloc +27262976 11534336", 1},
		{true, 0, "free_completed +0 11534336; free_completed +12582912 524288; " +
			"segment_alloc +27262976 12582912; alloc +27262976 11534336", 0},
		{false, 26 << 20, "alloc +0 11534336", 0},
	} {
		h := newHarness(t, "", 80*gib)
		h.a.SetMemoryLimit(c.limit)
		x := h.malloc(11 << 20)
		other := h.malloc(512 * kib) // a small segment, pending too
		for _, p := range []uint64{x, other} {
			if err := h.a.RecordStream(p, 7); err != nil {
				t.Fatal(err)
			}
			h.free(p)
		}
		h.malloc(11 << 20) // the other 12 MiB segment: the limit is reached
		for _, p := range []uint64{x, other} {
			var err error
			if c.late {
				err = h.a.CompleteLate(p, 0)
			} else {
				err = h.a.CompleteFree(p)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		h.ev = h.ev[:0]
		h.malloc(11 << 20)
		if got := h.events(x); got != c.want {
			t.Errorf("late %v, limit %d: events\n%s\nwant\n%s", c.late, c.limit, got, c.want)
		}
		h.stats(map[string]int64{"num_alloc_retries": c.retries, "num_sync_all_streams": c.retries})
	}
}
