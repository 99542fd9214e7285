package replay

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestLiveGrowth: the numbered slots of liveBlocks grow by doubling, so
// the arrays left behind add up to about the last one. Grown by append (a
// quarter at a time past 256 entries) they added up to about four times
// it: 53 MB allocated for 10 MB of slots at 400,000 blocks, touched by the
// copies and resident until the runtime gives them back.
func TestLiveGrowth(t *testing.T) {
	const n = 400_000
	var l liveBlocks
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := int32(1); i <= n; i++ {
		l.put(uint64(i)<<9, i, blockRef{addr: uint64(i) << 9})
	}
	runtime.ReadMemStats(&after)
	final := int64(cap(l.byRef)) * int64(unsafe.Sizeof(refSlot{}))
	if got := int64(after.TotalAlloc - before.TotalAlloc); got > 5*final/2 {
		t.Errorf("%d blocks: %d MB allocated for %d MB of slots, want at most 2.5 times", n, got>>20, final>>20)
	}
	for i := int32(1); i <= n; i += n / 7 {
		if s := l.slot(uint64(i)<<9, i); s == nil || s.addr != uint64(i)<<9 {
			t.Fatalf("block %d not found at its number", i)
		}
	}
}
