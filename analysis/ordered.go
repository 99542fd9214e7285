package analysis

// ordered is a map from int64 keys to values kept in key order: a treap
// (a binary search tree whose nodes also form a heap of random priorities),
// so that insertion, removal and the search for a key's floor take
// O(log n) expected steps. The summarizer keeps its segments in one, by
// address, and the segment layout it copies at the reserved peak in
// another.
type ordered[V any] struct {
	root *onode[V]
	n    int
	seed uint64      // xorshift state of the priorities: deterministic
	pool []*onode[V] // removed nodes, reused
	// visits counts the nodes a method stepped through, for the tests.
	visits int
}

type onode[V any] struct {
	key         int64
	prio        uint64
	left, right *onode[V]
	val         V
}

// nextPrio returns the next pseudo-random priority.
func (t *ordered[V]) nextPrio() uint64 {
	if t.seed == 0 {
		t.seed = 0x9e3779b97f4a7c15
	}
	t.seed ^= t.seed << 13
	t.seed ^= t.seed >> 7
	t.seed ^= t.seed << 17
	return t.seed
}

// Len returns the number of keys.
func (t *ordered[V]) Len() int { return t.n }

// insert adds key with val; key must not be present.
func (t *ordered[V]) insert(key int64, val V) {
	var n *onode[V]
	if k := len(t.pool); k > 0 {
		n = t.pool[k-1]
		t.pool = t.pool[:k-1]
	} else {
		n = new(onode[V])
	}
	*n = onode[V]{key: key, prio: t.nextPrio(), val: val}
	t.root = t.insertAt(t.root, n)
	t.n++
}

func (t *ordered[V]) insertAt(root, n *onode[V]) *onode[V] {
	t.visits++
	if root == nil {
		return n
	}
	if n.prio > root.prio {
		n.left, n.right = t.split(root, n.key)
		return n
	}
	if n.key < root.key {
		root.left = t.insertAt(root.left, n)
	} else {
		root.right = t.insertAt(root.right, n)
	}
	return root
}

// split divides the tree at root into the keys below key and the rest.
func (t *ordered[V]) split(root *onode[V], key int64) (lo, hi *onode[V]) {
	if root == nil {
		return nil, nil
	}
	t.visits++
	if root.key < key {
		root.right, hi = t.split(root.right, key)
		return root, hi
	}
	lo, root.left = t.split(root.left, key)
	return lo, root
}

// merge joins two trees, every key of a below every key of b.
func (t *ordered[V]) merge(a, b *onode[V]) *onode[V] {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	t.visits++
	if a.prio > b.prio {
		a.right = t.merge(a.right, b)
		return a
	}
	b.left = t.merge(a, b.left)
	return b
}

// remove deletes key and returns its value.
func (t *ordered[V]) remove(key int64) (V, bool) {
	p := &t.root
	for n := *p; n != nil; n = *p {
		t.visits++
		switch {
		case key < n.key:
			p = &n.left
		case key > n.key:
			p = &n.right
		default:
			*p = t.merge(n.left, n.right)
			val := n.val
			var zero V
			n.val, n.left, n.right = zero, nil, nil
			t.pool = append(t.pool, n)
			t.n--
			return val, true
		}
	}
	var zero V
	return zero, false
}

// get returns key's value.
func (t *ordered[V]) get(key int64) (V, bool) {
	for n := t.root; n != nil; {
		t.visits++
		switch {
		case key < n.key:
			n = n.left
		case key > n.key:
			n = n.right
		default:
			return n.val, true
		}
	}
	var zero V
	return zero, false
}

// floor returns the node of the greatest key at or below key, or nil.
func (t *ordered[V]) floor(key int64) *onode[V] {
	var best *onode[V]
	for n := t.root; n != nil; {
		t.visits++
		if n.key <= key {
			best, n = n, n.right
		} else {
			n = n.left
		}
	}
	return best
}

// ascend calls fn for the keys from the floor of from (or the first key
// when from has no floor) in order, until fn returns false.
func (t *ordered[V]) ascend(from int64, fn func(key int64, val V) bool) {
	if f := t.floor(from); f != nil {
		from = f.key
	}
	t.ascendAt(t.root, from, fn)
}

func (t *ordered[V]) ascendAt(n *onode[V], from int64, fn func(int64, V) bool) bool {
	if n == nil {
		return true
	}
	t.visits++
	if n.key >= from {
		if !t.ascendAt(n.left, from, fn) || !fn(n.key, n.val) {
			return false
		}
	}
	return t.ascendAt(n.right, from, fn)
}

// each calls fn for every key in order.
func (t *ordered[V]) each(fn func(key int64, val V)) {
	t.ascendAt(t.root, -1<<63, func(k int64, v V) bool { fn(k, v); return true })
}
