package allocator

import (
	"math/rand"
	"slices"
	"testing"
)

// TestSizeSet checks sizeSet against a sorted slice under random updates,
// with sizes spread over many size classes.
func TestSizeSet(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	var s sizeSet
	var ref []freeKey
	cmpKey := cmpFreeKey
	sizes := func() int64 {
		switch rng.Intn(4) {
		case 0:
			return int64(rng.Intn(50))
		case 1:
			return int64(rng.Intn(200)) << 9
		case 2:
			return int64(rng.Intn(40)) << (9 + rng.Intn(30))
		}
		return int64(rng.Int63n(1<<40)) &^ 511
	}
	rk := func() freeKey {
		return freeKey{stream: uint64(rng.Intn(3)), size: sizes(), addr: uint64(rng.Intn(20))}
	}
	for step := 0; step < 60000; step++ {
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
		if s.Len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, s.Len(), len(ref))
		}
		p := rk()
		if rng.Intn(8) == 0 {
			p.size = -1
		}
		j, _ := slices.BinarySearchFunc(ref, p, cmpKey)
		var asc []freeKey
		s.AscendGreaterOrEqual(p, func(k freeKey) bool { asc = append(asc, k); return len(asc) < 5 })
		if want := ref[j:min(len(ref), j+5)]; !slices.Equal(asc, want) {
			t.Fatalf("step %d: ascend from %v = %v, want %v", step, p, asc, want)
		}
		if f, ok := s.first(p); ok != (j < len(ref)) || (ok && f != ref[j]) {
			t.Fatalf("step %d: first from %v = %v %v", step, p, f, ok)
		}
		if b := s.stream(p.stream); b != nil && p.size >= 0 {
			c, i, ok := b.lowerBound(p.size, p.addr)
			want := j < len(ref) && ref[j].stream == p.stream
			if ok != want || (ok && b.key(p.stream, c, i) != ref[j]) {
				t.Fatalf("step %d: lowerBound %v: %v", step, p, ok)
			}
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
		if step%1000 == 0 {
			var all []freeKey
			s.Ascend(func(k freeKey) bool { all = append(all, k); return true })
			if !slices.Equal(all, ref) {
				t.Fatalf("step %d: ascend all differs", step)
			}
		}
	}
}

func TestSizeClass(t *testing.T) {
	prev := -1
	for s := int64(0); s < 1<<24; s += 512 {
		c := sizeClass(s)
		if c < prev || c > prev+1 {
			t.Fatalf("class(%d) = %d after %d", s, c, prev)
		}
		prev = c
	}
	if c := sizeClass(1<<63 - 1); c != maxClasses-1 || (maxClasses+63)/64 > 64 {
		t.Fatalf("top class %d", c)
	}
}
