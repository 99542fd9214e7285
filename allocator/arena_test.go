package allocator

import (
	"runtime"
	"testing"
)

// TestArenaGrowth: filling the block arena allocates about twice its final
// array (it doubles: the arrays left behind add up to the last one, whose
// unused part is never touched), not the five times that growing by quarters
// (append's rate for large slices) allocates, every old array of which
// stays resident until the runtime gives it back.
func TestArenaGrowth(t *testing.T) {
	const n = 200_000
	a, err := New(DefaultConf(), NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, _, err := a.MallocHandle(512, 0); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	final := int64(cap(a.blocks)) * 64
	got := int64(after.TotalAlloc - before.TotalAlloc)
	if got > 5*final/2 {
		t.Errorf("%d blocks: %d MB allocated for an arena of %d MB, want at most 2.5 times", len(a.blocks), got>>20, final>>20)
	}
}
