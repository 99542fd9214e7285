package torchsnap

import (
	"bytes"
	"runtime"
	"testing"
)

// TestBlocksCopiedOnce: the blocks of a snapshot's segments, read in
// batches by flatBlocks and settled a thousand segments at a time by the
// segments list's APPENDS (CPython's shape), are copied once, from the
// dicts into a slab, and each segment keeps its run of it: but for the
// first segment, whose first batch brings the keys (the general path
// reads it), no segment copies its blocks and no list holds a value a
// block, and a block moves to a new slab only with the segment it belongs
// to (fewer than one in 32 in all).
// The decode allocates under 128 bytes a block (106 when written), where
// the blocks kept in chunks, a value each in their list and a copy in
// their segment took 165.
func TestBlocksCopiedOnce(t *testing.T) {
	const segs, n = 40, 2048
	data := blocksSnapshot(segs, n)
	if _, err := decode(bytes.NewReader(data), 0); err != nil {
		t.Fatal(err) // warm up: the tables' first sizes
	}
	copies, vals := blockCopies.Load(), blockValues.Load()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := decode(bytes.NewReader(data), 0)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, sg := range s.Devices[0].Segments {
		total += len(sg.Blocks)
	}
	if total != segs*n {
		t.Fatalf("%d blocks decoded, want %d", total, segs*n)
	}
	copied, valued := blockCopies.Load()-copies, blockValues.Load()-vals
	if copied > segs*n/32 || valued > n {
		t.Errorf("%d blocks: %d copied after their conversion, %d values made for them in lists; want at most %d and %d",
			segs*n, copied, valued, segs*n/32, n)
	}
	if per := float64(after.TotalAlloc-before.TotalAlloc) / (segs * n); per > 128 {
		t.Errorf("decoding allocated %.0f bytes a block; want at most 128", per)
	}
}
