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
	rk := func() freeKey {
		return freeKey{stream: uint64(rng.Intn(3)), size: int64(rng.Intn(50)), addr: uint64(rng.Intn(50))}
	}
	for step := 0; step < 20000; step++ {
		stepOrderedSet(t, step, &s, &ref, rng.Intn(2) == 0, rk(), rk())
		if err := s.t.check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

// orderedFreeSet is what freeSet and sizeSet share: a set of free-block keys
// in (stream, size, address) order.
type orderedFreeSet interface {
	ReplaceOrInsert(freeKey)
	Delete(freeKey)
	Len() int
	AscendGreaterOrEqual(freeKey, func(freeKey) bool)
	DescendLessOrEqual(freeKey, func(freeKey) bool)
}

// stepOrderedSet inserts (or deletes) k in s and in the sorted reference
// slice, then checks the size and the five keys on either side of probe p.
func stepOrderedSet(t *testing.T, step int, s orderedFreeSet, ref *[]freeKey, insert bool, k, p freeKey) {
	t.Helper()
	i, found := slices.BinarySearchFunc(*ref, k, cmpFreeKey)
	if insert {
		s.ReplaceOrInsert(k)
		if !found {
			*ref = slices.Insert(*ref, i, k)
		}
	} else {
		s.Delete(k)
		if found {
			*ref = slices.Delete(*ref, i, i+1)
		}
	}
	r := *ref
	if s.Len() != len(r) {
		t.Fatalf("step %d: len %d, want %d", step, s.Len(), len(r))
	}
	j, eq := slices.BinarySearchFunc(r, p, cmpFreeKey)
	var asc []freeKey
	s.AscendGreaterOrEqual(p, func(k freeKey) bool { asc = append(asc, k); return len(asc) < 5 })
	if want := r[j:min(len(r), j+5)]; !slices.Equal(asc, want) {
		t.Fatalf("step %d: ascend from %v = %v, want %v", step, p, asc, want)
	}
	if eq {
		j++
	}
	var desc, want []freeKey
	s.DescendLessOrEqual(p, func(k freeKey) bool { desc = append(desc, k); return len(desc) < 5 })
	for x := j - 1; x >= 0 && len(want) < 5; x-- {
		want = append(want, r[x])
	}
	if !slices.Equal(desc, want) {
		t.Fatalf("step %d: descend from %v = %v, want %v", step, p, desc, want)
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

// TestFreeSetRekey moves keys in place to new keys that sort between their
// neighbours, as mapBlock does, and checks the set against a sorted slice.
func TestFreeSetRekey(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	var s freeSet
	var ref []freeKey
	for len(ref) < 500 {
		k := freeKey{stream: uint64(rng.Intn(2)), addr: uint64(rng.Intn(1<<20)) * 1024}
		if i, found := slices.BinarySearchFunc(ref, k, cmpFreeKey); !found {
			ref = slices.Insert(ref, i, k)
			s.ReplaceOrInsert(k)
		}
	}
	for step := 0; step < 5000; step++ {
		i := rng.Intn(len(ref))
		old := ref[i]
		// Any address up to the next key of the set, exclusive.
		limit := old.addr + 1024
		if i+1 < len(ref) && ref[i+1].stream == old.stream {
			limit = ref[i+1].addr
		}
		nk := old
		nk.addr += uint64(rng.Int63n(int64(limit - old.addr)))
		nk.id = blockID(step + 1)
		s.Rekey(old, nk)
		ref[i] = nk
		var got []freeKey
		s.Ascend(func(k freeKey) bool { got = append(got, k); return true })
		if !slices.Equal(got, ref) {
			t.Fatalf("step %d: after Rekey(%v, %v) the set differs from the reference", step, old, nk)
		}
		if err := s.t.check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}
