// Package ordered provides Map, an ordered map with O(log n) updates and
// searches, for the per-event paths that keep ranges of addresses sorted.
package ordered

import "cmp"

// Map is a map from ordered keys to values kept in key order: a treap
// (a binary search tree whose nodes also form a heap of random priorities),
// so that insertion, removal and the search for a key's floor take
// O(log n) expected steps. The priorities come from a fixed-seed
// generator: a run is deterministic. The zero Map is empty.
type Map[K cmp.Ordered, V any] struct {
	root *Node[K, V]
	n    int
	seed uint64        // xorshift state of the priorities: deterministic
	pool []*Node[K, V] // removed nodes, reused
	// Visits counts the nodes the methods stepped through, for tests that
	// bound the work.
	Visits int
}

// Node is one key and its value.
type Node[K cmp.Ordered, V any] struct {
	Key         K
	Val         V
	prio        uint64
	left, right *Node[K, V]
}

// nextPrio returns the next pseudo-random priority.
func (t *Map[K, V]) nextPrio() uint64 {
	if t.seed == 0 {
		t.seed = 0x9e3779b97f4a7c15
	}
	t.seed ^= t.seed << 13
	t.seed ^= t.seed >> 7
	t.seed ^= t.seed << 17
	return t.seed
}

// Len returns the number of keys.
func (t *Map[K, V]) Len() int { return t.n }

// Insert adds key with val; key must not be present.
func (t *Map[K, V]) Insert(key K, val V) {
	var n *Node[K, V]
	if k := len(t.pool); k > 0 {
		n = t.pool[k-1]
		t.pool = t.pool[:k-1]
	} else {
		n = new(Node[K, V])
	}
	*n = Node[K, V]{Key: key, prio: t.nextPrio(), Val: val}
	t.root = t.insertAt(t.root, n)
	t.n++
}

func (t *Map[K, V]) insertAt(root, n *Node[K, V]) *Node[K, V] {
	t.Visits++
	if root == nil {
		return n
	}
	if n.prio > root.prio {
		n.left, n.right = t.split(root, n.Key)
		return n
	}
	if n.Key < root.Key {
		root.left = t.insertAt(root.left, n)
	} else {
		root.right = t.insertAt(root.right, n)
	}
	return root
}

// split divides the tree at root into the keys below key and the rest.
func (t *Map[K, V]) split(root *Node[K, V], key K) (lo, hi *Node[K, V]) {
	if root == nil {
		return nil, nil
	}
	t.Visits++
	if root.Key < key {
		root.right, hi = t.split(root.right, key)
		return root, hi
	}
	lo, root.left = t.split(root.left, key)
	return lo, root
}

// merge joins two trees, every key of a below every key of b.
func (t *Map[K, V]) merge(a, b *Node[K, V]) *Node[K, V] {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	t.Visits++
	if a.prio > b.prio {
		a.right = t.merge(a.right, b)
		return a
	}
	b.left = t.merge(a, b.left)
	return b
}

// Remove deletes key and returns its value.
func (t *Map[K, V]) Remove(key K) (V, bool) {
	p := &t.root
	for n := *p; n != nil; n = *p {
		t.Visits++
		switch {
		case key < n.Key:
			p = &n.left
		case key > n.Key:
			p = &n.right
		default:
			*p = t.merge(n.left, n.right)
			val := n.Val
			var zero V
			n.Val, n.left, n.right = zero, nil, nil
			t.pool = append(t.pool, n)
			t.n--
			return val, true
		}
	}
	var zero V
	return zero, false
}

// Get returns key's value.
func (t *Map[K, V]) Get(key K) (V, bool) {
	for n := t.root; n != nil; {
		t.Visits++
		switch {
		case key < n.Key:
			n = n.left
		case key > n.Key:
			n = n.right
		default:
			return n.Val, true
		}
	}
	var zero V
	return zero, false
}

// Floor returns the node of the greatest key at or below key, or nil.
func (t *Map[K, V]) Floor(key K) *Node[K, V] {
	var best *Node[K, V]
	for n := t.root; n != nil; {
		t.Visits++
		if n.Key <= key {
			best, n = n, n.right
		} else {
			n = n.left
		}
	}
	return best
}

// Ascend calls fn for the keys from the floor of from (or the first key
// when from has no floor) in order, until fn returns false.
func (t *Map[K, V]) Ascend(from K, fn func(key K, val V) bool) {
	if f := t.Floor(from); f != nil {
		from = f.Key
	}
	t.ascendAt(t.root, from, fn)
}

func (t *Map[K, V]) ascendAt(n *Node[K, V], from K, fn func(K, V) bool) bool {
	if n == nil {
		return true
	}
	t.Visits++
	if n.Key >= from {
		if !t.ascendAt(n.left, from, fn) || !fn(n.Key, n.Val) {
			return false
		}
	}
	return t.ascendAt(n.right, from, fn)
}

// Each calls fn for every key in order.
func (t *Map[K, V]) Each(fn func(key K, val V)) {
	t.eachAt(t.root, fn)
}

func (t *Map[K, V]) eachAt(n *Node[K, V], fn func(K, V)) {
	for ; n != nil; n = n.right {
		t.Visits++
		t.eachAt(n.left, fn)
		fn(n.Key, n.Val)
	}
}

// Ceil returns the node of the least key at or above key, or nil.
func (t *Map[K, V]) Ceil(key K) *Node[K, V] {
	var best *Node[K, V]
	for n := t.root; n != nil; {
		t.Visits++
		if n.Key >= key {
			best, n = n, n.left
		} else {
			n = n.right
		}
	}
	return best
}
