// Package ordered provides Map, an ordered map with O(log n) updates and
// searches, for the per-event paths that keep ranges of addresses sorted.
package ordered

import "cmp"

// fanout is the most keys a node holds: 32 keys of 8 bytes are four cache
// lines, so a search reads a few lines per level and 1M keys take four
// or five levels, where a binary tree missed the cache at each of ~20.
const (
	fanout   = 32
	minItems = fanout / 2 // in every node but the root and the last leaf
)

// Map is a map from ordered keys to values kept in key order: a B+ tree
// whose nodes hold their keys in flat arrays and whose leaves, linked in
// order, hold the values. Insertion, removal and the searches take
// O(log n) steps in the worst case, and the shape follows from the
// operations alone: a run is deterministic. A key above every key (an
// address above the others, a copy made in order) goes into the last leaf
// without a search, and a full last leaf splits off only the new key, so
// that keys inserted in order fill their leaves. The zero Map is empty.
type Map[K cmp.Ordered, V any] struct {
	root   *inner[K, V] // nil while the keys fit in one leaf
	leaf   *leaf[K, V]  // the root while root is nil
	last   *leaf[K, V]  // the leaf of the greatest keys
	height int          // levels of inner nodes
	n      int
	// Visits counts the nodes the methods stepped through and the entries
	// they moved or passed, for tests that bound the work.
	Visits int
}

// leaf holds keys[:n] in order and their values.
type leaf[K cmp.Ordered, V any] struct {
	n          int
	keys       [fanout]K
	vals       [fanout]V
	prev, next *leaf[K, V]
}

// inner holds n children: leaves on the level above the leaves, inner
// nodes above that. For i ≥ 1 every key under child i-1 is below keys[i]
// and every key under child i at or above it (keys[0] is unused).
type inner[K cmp.Ordered, V any] struct {
	n      int
	keys   [fanout]K
	inners [fanout]*inner[K, V]
	leaves [fanout]*leaf[K, V]
}

// below returns how many of keys are below key (keys sorted).
func below[K cmp.Ordered](keys []K, key K) int {
	lo, hi := 0, len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if keys[m] < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// atOrBelow returns how many of keys are at or below key (keys sorted).
func atOrBelow[K cmp.Ordered](keys []K, key K) int {
	lo, hi := 0, len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if keys[m] <= key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// child returns the index of the child whose keys would hold key.
func (in *inner[K, V]) child(key K) int {
	return atOrBelow(in.keys[1:in.n], key)
}

// Len returns the number of keys.
func (t *Map[K, V]) Len() int { return t.n }

// find returns the leaf whose keys would hold key.
func (t *Map[K, V]) find(key K) *leaf[K, V] {
	if t.root == nil {
		t.Visits++
		return t.leaf
	}
	in := t.root
	for h := t.height; ; h-- {
		t.Visits++
		i := in.child(key)
		if h == 1 {
			t.Visits++
			return in.leaves[i]
		}
		in = in.inners[i]
	}
}

// first returns the leaf of the least keys.
func (t *Map[K, V]) first() *leaf[K, V] {
	if t.root == nil {
		t.Visits++
		return t.leaf
	}
	in := t.root
	for h := t.height; h > 1; h-- {
		t.Visits++
		in = in.inners[0]
	}
	t.Visits += 2
	return in.leaves[0]
}

// Get returns key's value.
func (t *Map[K, V]) Get(key K) (V, bool) {
	if l := t.find(key); l != nil {
		if i := below(l.keys[:l.n], key); i < l.n && l.keys[i] == key {
			return l.vals[i], true
		}
	}
	var zero V
	return zero, false
}

// Floor returns the greatest key at or below key and its value; ok is
// false when there is none.
func (t *Map[K, V]) Floor(key K) (k K, v V, ok bool) {
	l := t.find(key)
	if l == nil {
		return k, v, false
	}
	i := atOrBelow(l.keys[:l.n], key) - 1
	if i < 0 {
		// The separators are bounds, not the least keys: the floor may be
		// the last key of the leaf before.
		if l = l.prev; l == nil {
			return k, v, false
		}
		t.Visits++
		i = l.n - 1
	}
	return l.keys[i], l.vals[i], true
}

// Ceil returns the least key at or above key and its value; ok is false
// when there is none.
func (t *Map[K, V]) Ceil(key K) (k K, v V, ok bool) {
	l := t.find(key)
	if l == nil {
		return k, v, false
	}
	i := below(l.keys[:l.n], key)
	if i == l.n {
		if l = l.next; l == nil {
			return k, v, false
		}
		t.Visits++
		i = 0
	}
	return l.keys[i], l.vals[i], true
}

// Ascend calls fn for the keys from the floor of from (or the first key
// when from has no floor) in order, until fn returns false.
func (t *Map[K, V]) Ascend(from K, fn func(key K, val V) bool) {
	l := t.find(from)
	if l == nil {
		return
	}
	i := atOrBelow(l.keys[:l.n], from) - 1
	if i < 0 {
		if l.prev != nil {
			l, i = l.prev, l.prev.n-1
		} else {
			i = 0
		}
	}
	t.walk(l, i, fn)
}

// Each calls fn for every key in order.
func (t *Map[K, V]) Each(fn func(key K, val V)) {
	if l := t.first(); l != nil {
		t.walk(l, 0, func(k K, v V) bool { fn(k, v); return true })
	}
}

// walk calls fn for the keys from l's i-th on, until fn returns false.
func (t *Map[K, V]) walk(l *leaf[K, V], i int, fn func(K, V) bool) {
	for ; l != nil; l, i = l.next, 0 {
		for ; i < l.n; i++ {
			t.Visits++
			if !fn(l.keys[i], l.vals[i]) {
				return
			}
		}
	}
}

// Insert sets key's value, adding the key when it is not present.
func (t *Map[K, V]) Insert(key K, val V) {
	if l := t.last; l != nil && l.n > 0 && l.n < fanout && key > l.keys[l.n-1] {
		t.Visits++
		l.keys[l.n], l.vals[l.n] = key, val
		l.n++
		t.n++
		return
	}
	if t.root == nil {
		if t.leaf == nil {
			t.leaf = new(leaf[K, V])
			t.last = t.leaf
		}
		t.Visits++
		if r := t.insertLeaf(t.leaf, key, val); r != nil {
			t.root = &inner[K, V]{n: 2}
			t.root.leaves[0], t.root.leaves[1], t.root.keys[1] = t.leaf, r, r.keys[0]
			t.leaf, t.height = nil, 1
		}
		return
	}
	if r, sep := t.insertInner(t.root, t.height, key, val); r != nil {
		root := &inner[K, V]{n: 2}
		root.inners[0], root.inners[1], root.keys[1] = t.root, r, sep
		t.root = root
		t.height++
	}
}

// insertInner sets key in the subtree of in, h levels of inner nodes
// high, and returns the node split off to in's right and its separator,
// if in split.
func (t *Map[K, V]) insertInner(in *inner[K, V], h int, key K, val V) (*inner[K, V], K) {
	t.Visits++
	i := in.child(key)
	var sep K
	if h == 1 {
		t.Visits++
		r := t.insertLeaf(in.leaves[i], key, val)
		if r == nil {
			return nil, sep
		}
		return t.addChild(in, i+1, r.keys[0], nil, r)
	}
	r, sep := t.insertInner(in.inners[i], h-1, key, val)
	if r == nil {
		return nil, sep
	}
	return t.addChild(in, i+1, sep, r, nil)
}

// addChild puts a new child at index i ≥ 1 of in (an inner node or a
// leaf) with separator sep, splitting in when full, and returns the node
// split off and its bound. A split moves half the children, and leaves
// the new child past the first of its node, so that the bound is a key
// of in. (Inner nodes split evenly even when keys come in order: one
// child alone in the last inner node would leave a short leaf under it
// nothing to merge with.)
func (t *Map[K, V]) addChild(in *inner[K, V], i int, sep K, ci *inner[K, V], cl *leaf[K, V]) (*inner[K, V], K) {
	var right *inner[K, V]
	var up K
	if in.n == fanout {
		right = &inner[K, V]{n: in.n - minItems}
		up = in.keys[minItems]
		t.moveChildren(right, 0, in, minItems, right.n)
		in.n = minItems
		if i > in.n {
			in, i = right, i-in.n
		}
	}
	t.moveChildren(in, i+1, in, i, in.n-i)
	in.keys[i], in.inners[i], in.leaves[i] = sep, ci, cl
	in.n++
	return right, up
}

// moveChildren copies c children of src from index j to dst at index i
// (the ranges may overlap) and clears what src no longer holds.
func (t *Map[K, V]) moveChildren(dst *inner[K, V], i int, src *inner[K, V], j, c int) {
	t.Visits += c
	copy(dst.keys[i:i+c], src.keys[j:j+c])
	copy(dst.inners[i:i+c], src.inners[j:j+c])
	copy(dst.leaves[i:i+c], src.leaves[j:j+c])
	if dst != src {
		clear(src.inners[j : j+c])
		clear(src.leaves[j : j+c])
	}
}

// insertLeaf sets key in l and returns the leaf split off to l's right,
// if l split.
func (t *Map[K, V]) insertLeaf(l *leaf[K, V], key K, val V) *leaf[K, V] {
	i := below(l.keys[:l.n], key)
	if i < l.n && l.keys[i] == key {
		l.vals[i] = val
		return nil
	}
	t.n++
	var r *leaf[K, V]
	if l.n == fanout {
		keep := minItems
		if i == l.n && l.next == nil {
			keep = fanout // the new key alone starts the new last leaf
		}
		r = &leaf[K, V]{prev: l, next: l.next}
		if l.next != nil {
			l.next.prev = r
		} else {
			t.last = r
		}
		l.next = r
		t.moveEntries(r, 0, l, keep, l.n-keep)
		r.n, l.n = l.n-keep, keep
		if i > l.n || l.n == fanout {
			l, i = r, i-l.n
		}
	}
	t.moveEntries(l, i+1, l, i, l.n-i)
	l.keys[i], l.vals[i] = key, val
	l.n++
	return r
}

// moveEntries copies c entries of src from index j to dst at index i (the
// ranges may overlap) and clears the values src no longer holds.
func (t *Map[K, V]) moveEntries(dst *leaf[K, V], i int, src *leaf[K, V], j, c int) {
	t.Visits += c
	copy(dst.keys[i:i+c], src.keys[j:j+c])
	copy(dst.vals[i:i+c], src.vals[j:j+c])
	if dst != src {
		clear(src.vals[j : j+c])
	}
}

// Remove deletes key and returns its value.
func (t *Map[K, V]) Remove(key K) (V, bool) {
	if t.root == nil {
		if t.leaf == nil {
			var zero V
			return zero, false
		}
		t.Visits++
		return t.removeLeaf(t.leaf, key)
	}
	v, ok := t.removeInner(t.root, t.height, key)
	if t.root.n == 1 {
		if t.height == 1 {
			t.leaf, t.root = t.root.leaves[0], nil
		} else {
			t.root = t.root.inners[0]
		}
		t.height--
	}
	return v, ok
}

// removeInner deletes key from the subtree of in, h levels of inner
// nodes high, and refills the child it left short of minItems.
func (t *Map[K, V]) removeInner(in *inner[K, V], h int, key K) (V, bool) {
	t.Visits++
	i := in.child(key)
	if h == 1 {
		t.Visits++
		l := in.leaves[i]
		v, ok := t.removeLeaf(l, key)
		if ok && l.n < minItems {
			t.refillLeaf(in, i)
		}
		return v, ok
	}
	c := in.inners[i]
	v, ok := t.removeInner(c, h-1, key)
	if ok && c.n < minItems {
		t.refillInner(in, i)
	}
	return v, ok
}

// removeLeaf deletes key from l.
func (t *Map[K, V]) removeLeaf(l *leaf[K, V], key K) (V, bool) {
	var zero V
	i := below(l.keys[:l.n], key)
	if i == l.n || l.keys[i] != key {
		return zero, false
	}
	v := l.vals[i]
	t.moveEntries(l, i, l, i+1, l.n-i-1)
	l.n--
	l.vals[l.n] = zero
	t.n--
	return v, true
}

// refillLeaf merges in's i-th leaf with a neighbour, or moves entries
// between them so that each holds half.
func (t *Map[K, V]) refillLeaf(in *inner[K, V], i int) {
	if i == in.n-1 {
		i-- // the short leaf and the one before it
	}
	a, b := in.leaves[i], in.leaves[i+1]
	t.Visits += 2
	if a.n+b.n <= fanout {
		t.moveEntries(a, a.n, b, 0, b.n)
		a.n += b.n
		a.next = b.next
		if b.next != nil {
			b.next.prev = a
		} else {
			t.last = a
		}
		t.dropChild(in, i+1)
		return
	}
	half := (a.n + b.n) / 2
	if a.n > half {
		c := a.n - half
		t.moveEntries(b, c, b, 0, b.n)
		t.moveEntries(b, 0, a, half, c)
		a.n, b.n = half, b.n+c
	} else {
		c := half - a.n
		t.moveEntries(a, a.n, b, 0, c)
		t.moveEntries(b, 0, b, c, b.n-c)
		clear(b.vals[b.n-c : b.n])
		a.n, b.n = half, b.n-c
	}
	in.keys[i+1] = b.keys[0]
}

// dropChild removes in's i-th child, merged into the one before it.
func (t *Map[K, V]) dropChild(in *inner[K, V], i int) {
	t.moveChildren(in, i, in, i+1, in.n-i-1)
	in.n--
	in.inners[in.n], in.leaves[in.n] = nil, nil
}

// refillInner merges in's i-th child with a neighbour, or moves children
// between them so that each holds half.
func (t *Map[K, V]) refillInner(in *inner[K, V], i int) {
	if i == in.n-1 {
		i--
	}
	a, b := in.inners[i], in.inners[i+1]
	sep := in.keys[i+1]
	t.Visits += 2
	if a.n+b.n <= fanout {
		b.keys[0] = sep
		t.moveChildren(a, a.n, b, 0, b.n)
		a.n += b.n
		t.dropChild(in, i+1)
		return
	}
	half := (a.n + b.n) / 2
	if a.n > half {
		c := a.n - half
		t.moveChildren(b, c, b, 0, b.n)
		b.keys[c] = sep
		t.moveChildren(b, 0, a, half, c)
		in.keys[i+1] = b.keys[0]
		a.n, b.n = half, b.n+c
	} else {
		c := half - a.n
		b.keys[0] = sep
		t.moveChildren(a, a.n, b, 0, c)
		in.keys[i+1] = b.keys[c]
		t.moveChildren(b, 0, b, c, b.n-c)
		clear(b.inners[b.n-c : b.n])
		clear(b.leaves[b.n-c : b.n])
		a.n, b.n = half, b.n-c
	}
}
