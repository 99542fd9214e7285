package torchsnap

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortByAddr: sortByAddr orders distinct block addresses as a
// comparison sort does, in the radix's range and below it, for addresses
// 512 bytes apart in a device's range, and for any bits at all.
func TestSortByAddr(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 100, radixMin - 1, radixMin, 50_000, 200_000} {
		for _, spread := range []func() uint64{
			func() uint64 { return 0x7f00_0000_0000 + r.Uint64N(80<<30)&^511 },
			r.Uint64,
		} {
			seen := map[uint64]bool{}
			blocks := make([]addrPending, 0, n)
			for len(blocks) < n {
				a := spread()
				if !seen[a] {
					seen[a] = true
					blocks = append(blocks, addrPending{addr: a, pending: a&1024 != 0})
				}
			}
			want := slices.Clone(blocks)
			slices.SortFunc(want, byAddr)
			sortByAddr(blocks)
			if !slices.Equal(blocks, want) {
				t.Fatalf("%d blocks: not sorted as by comparison", n)
			}
		}
	}
}
