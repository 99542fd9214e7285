package allocator

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// check verifies t's invariants: keys sorted across the linked leaves,
// each inner entry's greatest key and count those of its child, every node
// but the root at least a quarter full, and n the number of keys.
func (t *kTree) check() error {
	if t.height == 0 {
		if t.leaf == nil {
			if t.n != 0 {
				return fmt.Errorf("no root, n %d", t.n)
			}
			return nil
		}
		if t.leaf.n != t.n || t.leaf.prev != nil || t.leaf.next != nil {
			return fmt.Errorf("root leaf of %d keys, n %d", t.leaf.n, t.n)
		}
		return sortedKeys(t.leaf.keys[:t.leaf.n])
	}
	var leaves []*kLeaf
	var walk func(nd *kInner, lv int) (freeKey, int, error)
	walk = func(nd *kInner, lv int) (freeKey, int, error) {
		if (lv > 0 && nd.n < minFill) || nd.n < 2 || nd.n > fanCap {
			return freeKey{}, 0, fmt.Errorf("depth %d: inner node of %d children", lv, nd.n)
		}
		tot := 0
		for j := range nd.n {
			var m freeKey
			var c int
			if lv == t.height-1 {
				l := nd.leaf[j]
				if l.n < minFill || l.n > leafCap {
					return freeKey{}, 0, fmt.Errorf("leaf of %d keys", l.n)
				}
				leaves = append(leaves, l)
				m, c = l.keys[l.n-1], l.n
			} else {
				var err error
				if m, c, err = walk(nd.kid[j], lv+1); err != nil {
					return freeKey{}, 0, err
				}
			}
			if nd.max[j] != m || nd.cnt[j] != c {
				return freeKey{}, 0, fmt.Errorf("depth %d child %d: max %v count %d, want %v %d", lv, j, nd.max[j], nd.cnt[j], m, c)
			}
			tot += c
		}
		if tot != nd.total {
			return freeKey{}, 0, fmt.Errorf("depth %d: total %d, want %d", lv, nd.total, tot)
		}
		return nd.max[nd.n-1], tot, nil
	}
	_, tot, err := walk(t.inner, 0)
	if err != nil {
		return err
	}
	if tot != t.n {
		return fmt.Errorf("%d keys, n %d", tot, t.n)
	}
	var all []freeKey
	for i, l := range leaves {
		if (i > 0) != (l.prev != nil) || (i > 0 && l.prev != leaves[i-1]) || (i+1 < len(leaves)) != (l.next != nil) || (i+1 < len(leaves) && l.next != leaves[i+1]) {
			return fmt.Errorf("leaf %d: links broken", i)
		}
		all = append(all, l.keys[:l.n]...)
	}
	return sortedKeys(all)
}

// insertRef inserts k in tr and in the sorted slice ref, which it
// returns, failing if insert's report of a new key is wrong.
func insertRef(t *testing.T, tr *kTree, ref []freeKey, k freeKey, step int) []freeKey {
	t.Helper()
	i, found := slices.BinarySearchFunc(ref, k, cmpFreeKey)
	if tr.insert(k) == found {
		t.Fatalf("step %d: insert %v reported new %v", step, k, found)
	}
	if found {
		ref[i] = k
		return ref
	}
	return slices.Insert(ref, i, k)
}

func sortedKeys(ks []freeKey) error {
	for i := 1; i < len(ks); i++ {
		if !less(&ks[i-1], &ks[i]) {
			return fmt.Errorf("keys %d and %d out of order: %v %v", i-1, i, ks[i-1], ks[i])
		}
	}
	return nil
}

// TestKTree checks kTree's ranks, lower bounds and invariants against a
// sorted slice, through growth to three levels and shrinking to nothing.
func TestKTree(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var tr kTree
	var ref []freeKey
	maxHeight := 0
	for step := 0; step < 120000; step++ {
		grow := step < 60000
		k := freeKey{size: int64(rng.Intn(1 << 16)), addr: uint64(rng.Intn(4)), id: blockID(step)}
		i, found := slices.BinarySearchFunc(ref, k, cmpFreeKey)
		switch r := rng.Intn(10); {
		case (grow && r < 7) || (!grow && r < 3):
			ref = insertRef(t, &tr, ref, k, step)
		case len(ref) > 0 && r%2 == 0:
			j := rng.Intn(len(ref))
			tr.deleteRank(j)
			ref = slices.Delete(ref, j, j+1)
		default:
			if tr.delete(k) != found {
				t.Fatalf("step %d: delete %v reported %v", step, k, !found)
			}
			if found {
				ref = slices.Delete(ref, i, i+1)
			}
		}
		if tr.Len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, tr.Len(), len(ref))
		}
		if want, _ := slices.BinarySearchFunc(ref, k, cmpFreeKey); tr.lowerRank(k) != want {
			t.Fatalf("step %d: lowerRank %v = %d, want %d", step, k, tr.lowerRank(k), want)
		}
		maxHeight = max(maxHeight, tr.height)
		if len(ref) > 0 {
			j := rng.Intn(len(ref))
			if got := tr.at(j); got != ref[j] {
				t.Fatalf("step %d: at(%d) = %v, want %v", step, j, got, ref[j])
			}
		}
		if step%500 == 0 || len(ref) < 200 {
			if err := tr.check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	for len(ref) > 0 { // drain
		j := rng.Intn(len(ref))
		if !tr.delete(ref[j]) {
			t.Fatalf("drain: %v not found", ref[j])
		}
		ref = slices.Delete(ref, j, j+1)
		if len(ref)%1000 == 0 || len(ref) < 100 {
			if err := tr.check(); err != nil {
				t.Fatalf("drain at %d: %v", len(ref), err)
			}
		}
	}
	if maxHeight < 2 || tr.height != 0 || len(ref) != 0 {
		t.Fatalf("the tree reached height %d and ends at %d with %d keys: want 2 or more, then 0 and none", maxHeight, tr.height, len(ref))
	}
}

// TestKTreeFinger inserts ascending runs, each in a gap between keys
// already there (as the seed's frees go in, in address order, among the
// blocks still allocated), with an equal key now and then and deletions
// between runs, against a sorted slice. Past a run's first key, every key
// goes in where the finger's index says (follows): two comparisons, not a
// search of the leaf, splits or not.
func TestKTreeFinger(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	var tr kTree
	var ref []freeKey
	step := 0
	put := func(k freeKey) {
		ref = insertRef(t, &tr, ref, k, step)
		step++
	}
	for a := range 4000 {
		put(freeKey{size: 512, addr: uint64(a) << 20, id: blockID(a)})
	}
	fast, run := 0, 0
	gaps := rng.Perm(4000) // each run in a gap of its own
	for r := range 400 {
		base := uint64(gaps[r])<<20 + 1
		for j := range uint64(1 + rng.Intn(300)) {
			k := freeKey{size: 512, addr: base + j, id: blockID(r)}
			if j > 0 && rng.Intn(20) == 0 { // an equal key: replaced, and the run goes on
				prev := k
				prev.addr--
				put(prev)
			}
			h := fingerHits
			put(k)
			if j > 0 {
				run++
				fast += fingerHits - h
			}
		}
		for range rng.Intn(50) {
			j := rng.Intn(len(ref))
			tr.deleteRank(j)
			ref = slices.Delete(ref, j, j+1)
		}
		if err := tr.check(); err != nil {
			t.Fatalf("run %d: %v", r, err)
		}
		for i := range ref {
			if tr.at(i) != ref[i] {
				t.Fatalf("run %d: at(%d) = %v, want %v", r, i, tr.at(i), ref[i])
			}
		}
	}
	if fast != run {
		t.Fatalf("%d of %d keys after a run's first went where the finger's index said, want all", fast, run)
	}
}

// TestKTreeMovingStart takes keys from the front of a tree, as a crowded
// class gives its smallest block, and puts keys back near the front: a
// leaf's start moves instead of its keys, so a deletion or insertion in a
// leaf's first half moves only the keys before it (none at the front).
// Then a mix at random places, front-heavy, against a sorted slice.
func TestKTreeMovingStart(t *testing.T) {
	var tr kTree
	const n = 20000
	for a := range n {
		tr.insert(freeKey{size: 512, addr: uint64(a) << 8, id: blockID(a)})
	}
	w := treeWork
	for a := range n / 2 {
		if k := tr.takeFirst(); k.addr != uint64(a)<<8 {
			t.Fatalf("takeFirst: %v, want address %#x", k, uint64(a)<<8)
		}
	}
	per := float64(treeWork-w) / (n / 2)
	t.Logf("taking the first key: %.1f nodes visited and keys moved a deletion", per)
	if per > 6 {
		t.Fatalf("taking the first key: %.1f nodes visited and keys moved a deletion, want at most 6", per)
	}
	w = treeWork
	for a := range n / 4 { // each key before the last one put back
		tr.insert(freeKey{size: 512, addr: uint64(n/2-a)<<8 - 1, id: blockID(a)})
	}
	// The splits move three quarters of a leaf and the moves to the middle of
	// a leaf's buffer a leaf, both only once the room they leave is used.
	per = float64(treeWork-w) / (n / 4)
	t.Logf("putting keys back before the first: %.1f nodes visited and keys moved an insertion", per)
	if per > 10 {
		t.Fatalf("putting keys back before the first: %.1f nodes visited and keys moved an insertion, want at most 10", per)
	}
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewSource(5))
	var ref []freeKey
	tr = kTree{}
	for step := range 60000 {
		if len(ref) > 0 && rng.Intn(3) > 0 && step%7 != 0 {
			j := 0
			if rng.Intn(4) == 0 {
				j = rng.Intn(len(ref))
			}
			tr.deleteRank(j)
			ref = slices.Delete(ref, j, j+1)
		} else {
			k := freeKey{size: int64(rng.Intn(64)), addr: uint64(rng.Intn(1 << 12)), id: blockID(step)}
			ref = insertRef(t, &tr, ref, k, step)
		}
		if step%97 == 0 {
			if err := tr.check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			for i := range ref {
				if tr.at(i) != ref[i] {
					t.Fatalf("step %d: at(%d) = %v, want %v", step, i, tr.at(i), ref[i])
				}
			}
		}
	}
}
