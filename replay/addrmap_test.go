package replay

import (
	"math/rand"
	"testing"
)

func TestAddrMap(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	m := newAddrMap()
	ref := map[uint64]uint64{}
	for step := 0; step < 200000; step++ {
		k := uint64(rng.Intn(3000)) << 9
		if rng.Intn(4) == 0 {
			k = uint64(rng.Intn(3000))<<21 | 1<<47
		}
		switch rng.Intn(3) {
		case 0, 1:
			v := uint64(rng.Intn(1000))
			m.put(k, v)
			ref[k] = v
		default:
			m.del(k)
			delete(ref, k)
		}
		got, ok := m.get(k)
		want, wok := ref[k]
		if got != want || ok != wok {
			t.Fatalf("step %d: get(%#x) = %d %v, want %d %v", step, k, got, ok, want, wok)
		}
		if m.n+map[bool]int{true: 1}[m.hasZero] != len(ref) {
			t.Fatalf("step %d: %d entries, want %d", step, m.n, len(ref))
		}
	}
}
