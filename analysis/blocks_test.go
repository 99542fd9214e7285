package analysis

import (
	"math/rand/v2"
	"testing"
)

// The hash table agrees with a Go map under random puts and deletes,
// including the backward-shift deletions across wrapped probe runs.
func TestBlocks_randomAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var tab blocks
	ref := map[int64]int64{}
	for i := 0; i < 200000; i++ {
		addr := int64(r.IntN(5000)) * 512
		if _, ok := ref[addr]; ok {
			if got := tab.get(addr); got == nil || got.size != ref[addr] {
				t.Fatalf("op %d: get(%#x) = %v, want size %d", i, addr, got, ref[addr])
			}
			tab.del(addr)
			delete(ref, addr)
		} else {
			if tab.get(addr) != nil {
				t.Fatalf("op %d: get(%#x) found a deleted block", i, addr)
			}
			tab.put(block{addr: addr, size: int64(i)}, blockInfo{}, 0)
			ref[addr] = int64(i)
		}
	}
	n := 0
	tab.each(func(b *block) {
		n++
		if ref[b.addr] != b.size {
			t.Errorf("block %#x has size %d, want %d", b.addr, b.size, ref[b.addr])
		}
	})
	if n != len(ref) || tab.n != len(ref) {
		t.Errorf("%d blocks (n=%d), want %d", n, tab.n, len(ref))
	}
}
