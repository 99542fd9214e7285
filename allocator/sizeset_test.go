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
	s := sizeSet{slab: new(pageSlab)}
	var ref []freeKey
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
		// Block ids start at 1 (an empty class has id 0); an id that
		// follows from the key keeps replacing an equal key a no-op.
		addr := uint64(rng.Intn(20))
		return freeKey{stream: uint64(rng.Intn(3)), size: sizes(), addr: addr, id: blockID(addr + 1)}
	}
	for step := 0; step < 60000; step++ {
		p := rk()
		if rng.Intn(8) == 0 {
			p.size = -1
		}
		stepOrderedSet(t, step, &s, &ref, rng.Intn(2) == 0, rk(), p)
		j, _ := slices.BinarySearchFunc(ref, p, cmpFreeKey)
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
