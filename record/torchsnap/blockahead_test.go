package torchsnap

import (
	"os"
	"testing"
)

// TestBlockAhead: segments' blocks read ahead by workers (blockAhead)
// decode to the snapshot the sequential machine gives, in pieces of
// several sizes: generated snapshots of many blocks, one of whose
// segments brings frames after the workers started (lists the commit
// resolves), and every real snapshot. In the generated ones the workers'
// batches are taken.
func TestBlockAhead(t *testing.T) {
	files := map[string][]byte{"generated": blocksSnapshot(4, 2500), "renewed": blocksSnapshotRenew(5, 2200, 2)}
	for _, path := range realSnapshots(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[name(path)] = data
	}
	for _, cfg := range []struct{ piece, workers int }{{40, 2}, {3000, 4}, {64 << 10, 3}} {
		for n, data := range files {
			t.Run(n, func(t *testing.T) {
				withRegions(t, cfg.piece, cfg.workers)
				before := aheadBatches.Load()
				if _, ok := decodeBoth(t, data); !ok {
					t.Fatal("fell back to sequential decoding")
				}
				taken := aheadBatches.Load() - before
				if (n == "generated" || n == "renewed") && taken < 5 {
					t.Errorf("pieces of %d bytes: %d batches taken from the workers, want most of them", cfg.piece, taken)
				}
			})
		}
	}
}

// TestBlockAheadLateState: the workers read a batch whose block states
// include a string first written after they started (the commit checks
// it), so that the machine reads almost no batch itself once they run. In
// small.pickle, where "inactive" first comes in the second segment, the
// machine read 665 of 1,219 batches on its own core without this.
func TestBlockAheadLateState(t *testing.T) {
	data := blocksSnapshotGen(6, 2500, -1, true)
	withRegions(t, 3000, 4)
	before, own := aheadBatches.Load(), ownAhead.Load()
	if _, ok := decodeBoth(t, data); !ok {
		t.Fatal("fell back to sequential decoding")
	}
	// One batch of the 15 after the workers start has a FRAME header
	// between its MARK and its first dict, which their search does not
	// find (blocksSnapshotRenew's frame(17)): the machine reads that one.
	if taken := aheadBatches.Load() - before; taken < 14 {
		t.Errorf("%d batches taken from the workers, want 14", taken)
	}
	if n := ownAhead.Load() - own; n > 1 {
		t.Errorf("%d batches read on the machine's goroutine while the workers ran, want 1", n)
	}
}

// FuzzBlockAhead: whatever the bytes, decoding with blocks read ahead (and
// regions) gives what the sequential machine gives: the same snapshot, or
// the same error, with no panic in any goroutine.
func FuzzBlockAhead(f *testing.F) {
	f.Add(blocksSnapshotRenew(3, 1100, 1))
	f.Add(blocksSnapshotGen(2, 1100, -1, true))
	f.Add(blocksSnapshot(1, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		withRegions(t, 40, 3)
		decodeBoth(t, data)
	})
}
