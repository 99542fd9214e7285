package allocator

import (
	"math/rand"
	"slices"
	"testing"
)

// TestFreeSet checks freeSet against a sorted slice under random updates.
func TestFreeSet(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var s freeSet
	var ref []freeKey
	cmpKey := cmpFreeKey
	rk := func() freeKey {
		return freeKey{stream: uint64(rng.Intn(3)), size: int64(rng.Intn(50)), addr: uint64(rng.Intn(50))}
	}
	for step := 0; step < 20000; step++ {
		k := rk()
		i, found := slices.BinarySearchFunc(ref, k, cmpKey)
		if rng.Intn(2) == 0 {
			s.ReplaceOrInsert(k)
			if !found {
				ref = slices.Insert(ref, i, k)
			}
		} else {
			s.Delete(k)
			if found {
				ref = slices.Delete(ref, i, i+1)
			}
		}
		for ci, c := range s.chunks {
			if len(c) == 0 || s.tails[ci] != c[len(c)-1] {
				t.Fatalf("step %d: chunk %d empty or its tail is stale", step, ci)
			}
		}
		if s.Len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, s.Len(), len(ref))
		}
		p := rk()
		j, _ := slices.BinarySearchFunc(ref, p, cmpKey)
		var asc []freeKey
		s.AscendGreaterOrEqual(p, func(k freeKey) bool { asc = append(asc, k); return len(asc) < 5 })
		if want := ref[j:min(len(ref), j+5)]; !slices.Equal(asc, want) {
			t.Fatalf("step %d: ascend from %v = %v, want %v", step, p, asc, want)
		}
		jj, eq := slices.BinarySearchFunc(ref, p, cmpKey)
		if eq {
			jj++
		}
		var desc []freeKey
		s.DescendLessOrEqual(p, func(k freeKey) bool { desc = append(desc, k); return len(desc) < 5 })
		var want []freeKey
		for x := jj - 1; x >= 0 && len(want) < 5; x-- {
			want = append(want, ref[x])
		}
		if !slices.Equal(desc, want) {
			t.Fatalf("step %d: descend from %v = %v, want %v", step, p, desc, want)
		}
	}
}

// cmpFreeKey orders free-set keys as the free sets do (less), for the
// reference slices the tests keep beside them.
func cmpFreeKey(a, b freeKey) int {
	if less(&a, &b) {
		return -1
	}
	if less(&b, &a) {
		return 1
	}
	return 0
}
