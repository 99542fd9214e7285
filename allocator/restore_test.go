package allocator

import (
	"errors"
	"testing"
)

// TestRestoreSplitOversize restores a layout PyTorch cannot reach under
// max_split_size_mb: a 100 MiB segment (recorded without the setting)
// whose free 90 MiB remainder, an oversize block, is split from a live
// one. Replaying a wrapped trace with --conf max_split_size_mb gives such
// a start. An allocation that fails must then not release that block as
// if it were a whole segment (release_available_cached_blocks assumes
// oversize blocks are never split, and its cudaFree of a split block made
// the model panic): it fails with PyTorch's OOM, and the state stays
// sound.
func TestRestoreSplitOversize(t *testing.T) {
	conf, err := ParseConf("max_split_size_mb:40")
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	base := uint64(1) << 40
	a, err := New(conf, NewSimDevice(gib))
	if err != nil {
		t.Fatal(err)
	}
	a.SetMemoryLimit(120 * mib)
	if err := a.Restore([]SegmentInfo{{Addr: base, Size: 100 * mib, Blocks: []BlockInfo{
		{Addr: base, Size: 10 * mib, Requested: 10 * mib, State: ActiveAllocated},
	}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// 95 MiB fits no free block and, under the limit, no new segment.
	if _, err := a.Malloc(95*mib, 0); !errors.Is(err, ErrOOM) {
		t.Fatalf("Malloc(95 MiB) = %v, want an OOM", err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().Segment[0].Current; got != 1 {
		t.Errorf("%d segments after the OOM, want the restored one", got)
	}
	// The split oversize block still serves what fits it (an oversize
	// request takes a block less than 20 MiB larger).
	if _, err := a.Malloc(80*mib, 0); err != nil {
		t.Fatalf("Malloc(80 MiB): %v", err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
