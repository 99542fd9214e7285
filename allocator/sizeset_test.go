package allocator

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// TestSizeSet checks sizeSet against a sorted slice under random updates,
// with sizes spread over many size classes, on 3 streams and on more than
// a scan finds (streamsFlat), which come in no order.
func TestSizeSet(t *testing.T) {
	for _, ns := range []int{3, 5 * streamsFlat} {
		t.Run(fmt.Sprint("streams=", ns), func(t *testing.T) { testSizeSet(t, ns) })
	}
}

func testSizeSet(t *testing.T, streams int) {
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
		return freeKey{stream: uint64(rng.Intn(streams)) * 0x9e3779b97f4a7c15 % 1000003, size: sizes(), addr: addr, id: blockID(addr + 1)}
	}
	for step := 0; step < 60000; step++ {
		p := rk()
		if rng.Intn(8) == 0 {
			p.size = -1
		}
		stepOrderedSet(t, step, &s, &ref, rng.Intn(2) == 0, rk(), p)
		j, _ := slices.BinarySearchFunc(ref, p, cmpFreeKey)
		if b := s.stream(p.stream); b != nil && p.size >= 0 {
			c, i, ok := b.lowerBound(p.size, p.addr)
			want := j < len(ref) && ref[j].stream == p.stream
			if ok != want || (ok && b.key(p.stream, c, i) != ref[j]) {
				t.Fatalf("step %d: lowerBound %v: %v", step, p, ok)
			}
			// The expandable scan's walk: succ steps to the next key of the
			// stream, to the stream's end.
			for k := j + 1; ok && k <= j+3; k++ {
				c, i, ok = b.succ(c, i)
				want := k < len(ref) && ref[k].stream == p.stream
				if ok != want || (ok && b.key(p.stream, c, i) != ref[k]) {
					t.Fatalf("step %d: succ to key %d of %v: %v", step, k, p, ok)
				}
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

// TestSizeSetCrowded checks sizeSet against a sorted slice where classes
// hold many entries, as the stress trace's exact classes do (a hundred
// free 512-byte fragments of the small pool): equal sizes in the exact
// classes below 64 KiB, sizes spread over one log-linear class, and the
// boundary between the two regimes (the last exact class and the first
// log-linear one). Phases of growth and of shrinking fill classes far
// past the rest buffer's inline room and empty them again, and malloc's
// best-fit removal runs among the updates.
//
// It runs with the default restMax and with a small one, which turns
// crowded classes into trees and back all the time.
func TestSizeSetCrowded(t *testing.T) {
	for _, rm := range []int{restMax, 6} {
		t.Run(fmt.Sprint("restMax=", rm), func(t *testing.T) {
			defer func(old int) { restMax = old }(restMax)
			restMax = rm
			testSizeSetCrowded(t)
		})
	}
}

func testSizeSetCrowded(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	trees := 0 // classes found in tree form at the checks
	defer func() {
		if !t.Failed() && trees == 0 {
			t.Errorf("no class grew past restMax %d", restMax)
		}
	}()
	s := sizeSet{slab: new(pageSlab)}
	var ref []freeKey
	sizes := func() int64 {
		switch rng.Intn(5) {
		case 0:
			return 512
		case 1:
			return 64<<10 - 512 // the last exact class
		case 2:
			return 64<<10 + int64(rng.Intn(2))*512 // the first log-linear class
		case 3:
			return 1<<20 + int64(rng.Intn(32))*512 // one class of 32 sizes
		}
		return int64(rng.Intn(3)) << 9
	}
	rk := func() freeKey {
		addr := uint64(rng.Intn(400))
		return freeKey{stream: uint64(rng.Intn(2)), size: sizes(), addr: addr, id: blockID(addr + 1)}
	}
	for step := 0; step < 200000; step++ {
		// Phases of growth and of shrinking.
		grow := (step/20000)%2 == 0
		insert := rng.Intn(10) < 3
		if grow {
			insert = rng.Intn(10) < 7
		}
		p := rk()
		if rng.Intn(8) == 0 {
			p.size = -1
		}
		k := rk()
		if !insert && len(ref) > 0 && rng.Intn(2) == 0 {
			k = ref[rng.Intn(len(ref))] // a key present: deletions hit
		}
		if rng.Intn(4) == 0 && len(ref) > 0 {
			// Take the best fit, as malloc does.
			q := ref[rng.Intn(len(ref))]
			if b := s.stream(q.stream); b != nil {
				if c, i, ok := b.lowerBound(q.size, 0); ok {
					got := b.key(q.stream, c, i)
					j, _ := slices.BinarySearchFunc(ref, freeKey{stream: q.stream, size: q.size}, cmpFreeKey)
					if got != ref[j] {
						t.Fatalf("step %d: best fit for %v = %v, want %v", step, q, got, ref[j])
					}
					s.deleteAt(b, c, b.binAt(c), i)
					ref = slices.Delete(ref, j, j+1)
				}
			}
		}
		stepOrderedSet(t, step, &s, &ref, insert, k, p)
		if step%500 == 0 {
			trees += checkRests(t, step, &s)
			var all []freeKey
			s.Ascend(func(k freeKey) bool { all = append(all, k); return true })
			if !slices.Equal(all, ref) {
				t.Fatalf("step %d: ascend all differs", step)
			}
		}
	}
}

// checkRests checks the representation of every class of s: nrest counts
// its rest, which is sorted in descending order above the header's entry.
// It returns the number of classes whose rest is a tree.
func checkRests(t *testing.T, step int, s *sizeSet) (trees int) {
	t.Helper()
	for _, x := range s.streams {
		for c := x.b.next(0); c >= 0; c = x.b.next(c + 1) {
			h := x.b.binAt(c)
			if h.rest == nil {
				if h.nrest != 0 {
					t.Fatalf("step %d: class %d: nrest %d without a rest", step, c, h.nrest)
				}
				continue
			}
			if h.rest.t != nil {
				trees++
				if err := h.rest.t.check(); err != nil {
					t.Fatalf("step %d: class %d: %v", step, c, err)
				}
				if len(h.rest.s) != 0 || h.rest.t.n <= restMax/4 {
					t.Fatalf("step %d: class %d: a tree of %d and a slice of %d", step, c, h.rest.t.n, len(h.rest.s))
				}
			}
			r := restEntries(h.rest)
			if len(r) != int(h.nrest) {
				t.Fatalf("step %d: class %d: rest of %d, nrest %d", step, c, len(r), h.nrest)
			}
			for i := range r {
				next := h.head()
				if i+1 < len(r) {
					next = r[i+1]
				}
				if !next.below(r[i].size, r[i].addr) {
					t.Fatalf("step %d: class %d: rest out of order at %d", step, c, i)
				}
			}
		}
	}
	return trees
}

// restEntries is a rest's entries in descending order, from its slice or
// its tree.
func restEntries(r *restBuf) []sEntry {
	if r.t == nil {
		return r.s
	}
	var out []sEntry
	for l := r.t.first(); l != nil; l = l.next {
		for _, k := range l.keys[:l.n] {
			out = append(out, keyEntry(k))
		}
	}
	slices.Reverse(out)
	return out
}
