package allocator

import (
	"math/rand"
	"testing"
)

// TestAddrMap checks addrMap against a Go map under random updates of
// clustered, aligned keys (and key 0).
func TestAddrMap(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	m := newAddrMap()
	ref := map[uint64]blockID{}
	for step := 0; step < 200000; step++ {
		k := uint64(rng.Intn(3000)) << 9
		if rng.Intn(4) == 0 {
			k = uint64(rng.Intn(3000))<<21 | 1<<47
		}
		switch rng.Intn(3) {
		case 0, 1:
			v := blockID(rng.Intn(1000) + 1)
			m.put(k, v)
			ref[k] = v
		default:
			m.del(k)
			delete(ref, k)
		}
		if got := m.get(k); got != ref[k] {
			t.Fatalf("step %d: get(%#x) = %d, want %d", step, k, got, ref[k])
		}
		if step%5000 == 0 {
			n := 0
			m.each(func(k uint64, v blockID) {
				n++
				if ref[k] != v {
					t.Fatalf("step %d: entry %#x=%d, want %d", step, k, v, ref[k])
				}
			})
			if n != len(ref) {
				t.Fatalf("step %d: %d entries, want %d", step, n, len(ref))
			}
		}
	}
}
