package ordered

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestOrderedLogarithmic: each insert, floor and remove among 2^16 keys
// steps through O(log n) nodes.
func TestOrderedLogarithmic(t *testing.T) {
	const n = 1 << 16
	var o Map[int64, int]
	rng := rand.New(rand.NewPCG(5, 6))
	keys := rng.Perm(n)
	for _, k := range keys {
		o.Insert(int64(k)*2, k)
	}
	limit := 4 * bits.Len(n) // expected depth is about 1.4·log2(n)
	for i := range 1000 {
		o.Visits = 0
		k := int64(keys[i]) * 2
		if f := o.Floor(k + 1); f == nil || f.Key != k {
			t.Fatalf("floor(%d) = %v, want %d", k+1, f, k)
		}
		o.Remove(k)
		o.Insert(k, 0)
		if o.Visits > 3*limit {
			t.Fatalf("floor, remove and insert of one key among %d touched %d nodes, want at most %d", n, o.Visits, 3*limit)
		}
	}
}
