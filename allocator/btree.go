package allocator

// kTree is an ordered set of freeKeys (less: stream, size, address), a
// B+tree: leaves of up to leafCap keys, linked for neighbour walks, under
// inner nodes of up to fanCap children that keep each child's greatest key
// and key count. Every node but the root is at least a quarter full, so an
// insertion, a deletion, a lower bound, the key at a rank or the rank of a
// key visits O(log n) nodes and moves at most one node's entries per level,
// whatever the order of the keys: the flat sorted slices it replaces moved
// every key above an insertion point. It is the unmapped set of a pool
// (freeSet), the crowded classes of a sizeSet and a sizeSet's many streams.
type kTree struct {
	leaf   *kLeaf  // the root while height == 0; nil until the first insertion
	inner  *kInner // the root while height > 0
	height int
	n      int
	spare  []*kLeaf // emptied leaves for reuse (reset keeps them)
	// nodes, if set, hands out the new nodes (a class's rest: the
	// allocator's, see nodeSupply); nil: they are allocated one by one.
	nodes *nodeSupply
	// finger is the leaf of the last insertion, and fpath the way to it,
	// while no split or deletion has changed the tree's shape since (nil
	// otherwise): a run of keys freed in ascending address order goes
	// in one after another, each in the finger's leaf or its successor's
	// front, where insert then takes the leaf without a search from the
	// root.
	finger *kLeaf
	fpath  kPath
	// fidx is the finger's index just past the last insertion: the next
	// key of an ascending run goes there when it sorts between the keys on
	// either side, which two comparisons tell without a search of the leaf.
	fidx int
}

const (
	leafCap   = 64
	fanCap    = 64
	minFill   = leafCap / 4 // and fanCap / 4
	maxHeight = 16          // a quarter-full tree of 2^63 keys is lower
)

// kLeaf's keys are buf from its start on, the first n of them: deleting a
// key in the leaf's first half moves the keys before it and the start one
// place on, and inserting one there moves them back into room before the
// start, where the keys after it would otherwise move (a crowded class
// gives its smallest block first).
type kLeaf struct {
	n          int
	prev, next *kLeaf
	keys       []freeKey // buf[start:]
	buf        [leafCap]freeKey
}

// room makes room for m keys from l's start on, moving its keys to buf's
// front if its start is too far on.
func (l *kLeaf) room(m int) {
	if len(l.keys) < m {
		addTreeWork(l.n)
		copy(l.buf[:], l.keys[:l.n])
		l.keys = l.buf[:]
	}
}

// kInner's children are leaves at height 1, inner nodes above.
type kInner struct {
	n     int
	total int // keys below
	max   [fanCap]freeKey
	cnt   [fanCap]int
	leaf  [fanCap]*kLeaf
	kid   [fanCap]*kInner
}

// treeWork counts the nodes kTree visits and the entries it moves: the
// tests that bound the work of an operation read it. One add per node
// costs nothing measurable.
var treeWork int

func addTreeWork(n int) {
	if countWork {
		treeWork += n
	}
}

// fingerHits counts the keys insert put where the finger's index said
// (follows), without a search; the tests read it.
var fingerHits int

// countWork turns the work counters (treeWork, flatWork, pendWork, poolWork) on. The
// package's tests set it; elsewhere it stays false, so that replays running
// at once (tune, several ranks) share no counter.
var countWork bool

// kPath is the way from the root to a leaf: node[lv] is the inner node at
// depth lv and idx[lv] the child taken.
type kPath struct {
	node [maxHeight]*kInner
	idx  [maxHeight]int
}

// Len returns the number of keys.
func (t *kTree) Len() int { return t.n }

func (t *kTree) newLeaf() *kLeaf {
	if n := len(t.spare); n > 0 {
		l := t.spare[n-1]
		t.spare = t.spare[:n-1]
		*l = kLeaf{}
		l.keys = l.buf[:]
		return l
	}
	var l *kLeaf
	if t.nodes != nil {
		l = t.nodes.leaf()
	}
	if l == nil {
		l = new(kLeaf)
	}
	l.keys = l.buf[:]
	return l
}

func (t *kTree) newInner() *kInner {
	if t.nodes != nil {
		if nd := t.nodes.inner(); nd != nil {
			return nd
		}
	}
	return new(kInner)
}

// seek returns the leaf and index of the first key not less than k,
// filling p; the index is the leaf's length when every key of the leaf is
// less (then k is past the tree's last key, and the leaf is the last).
func (t *kTree) seek(k *freeKey, p *kPath) (*kLeaf, int) {
	l := t.leaf
	if t.height > 0 {
		nd := t.inner
		for lv := 0; ; lv++ {
			addTreeWork(1)
			lo, hi := 0, nd.n-1 // the last child takes what is past its max
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				if less(&nd.max[m], k) {
					lo = m + 1
				} else {
					hi = m
				}
			}
			p.node[lv], p.idx[lv] = nd, lo
			if lv == t.height-1 {
				l = nd.leaf[lo]
				break
			}
			nd = nd.kid[lo]
		}
	}
	addTreeWork(1)
	return l, l.search(k)
}

// seekRank returns the leaf and index of the key of rank r < n, filling p.
func (t *kTree) seekRank(r int, p *kPath) (*kLeaf, int) {
	l := t.leaf
	if t.height > 0 {
		nd := t.inner
		for lv := 0; ; lv++ {
			addTreeWork(1)
			j := 0
			for r >= nd.cnt[j] {
				r -= nd.cnt[j]
				j++
			}
			p.node[lv], p.idx[lv] = nd, j
			if lv == t.height-1 {
				l = nd.leaf[j]
				break
			}
			nd = nd.kid[j]
		}
	}
	addTreeWork(1)
	return l, r
}

// rank is the rank of index i of the leaf p leads to.
func (t *kTree) rank(p *kPath, i int) int {
	for lv := 0; lv < t.height; lv++ {
		nd := p.node[lv]
		for j := 0; j < p.idx[lv]; j++ {
			i += nd.cnt[j]
		}
	}
	return i
}

// lowerRank returns the rank of the first key not less than k (n if none).
func (t *kTree) lowerRank(k freeKey) int {
	if t.n == 0 {
		return 0
	}
	var p kPath
	_, i := t.seek(&k, &p)
	return t.rank(&p, i)
}

// at returns the key of rank r < n.
func (t *kTree) at(r int) freeKey {
	var p kPath
	l, i := t.seekRank(r, &p)
	return l.keys[i]
}

// fixMax sets the greatest key of the leaf p leads to, l, in its ancestors
// while it is their last child's.
func (t *kTree) fixMax(p *kPath, l *kLeaf) {
	m := l.keys[l.n-1]
	for lv := t.height - 1; lv >= 0; lv-- {
		nd, j := p.node[lv], p.idx[lv]
		nd.max[j] = m
		if j != nd.n-1 {
			return
		}
	}
}

// insert adds k, replacing an equal key; it reports whether k is new.
func (t *kTree) insert(k freeKey) bool {
	if t.leaf == nil && t.height == 0 {
		t.leaf = t.newLeaf()
	}
	p := &t.fpath
	var l *kLeaf
	var i int
	if f := t.finger; f != nil && f.follows(t.fidx, &k) {
		l, i = f, t.fidx
		addTreeWork(1)
		if countWork {
			fingerHits++
		}
	} else if f != nil && f.holds(&k) {
		l, i = f, f.search(&k)
		addTreeWork(1)
	} else {
		l, i = t.seek(&k, p)
	}
	t.finger, t.fidx = l, i+1
	if i < l.n && !less(&k, &l.keys[i]) {
		l.keys[i] = k
		if i == l.n-1 && t.height > 0 {
			t.fixMax(p, l)
		}
		return false
	}
	t.n++
	for lv := 0; lv < t.height; lv++ {
		p.node[lv].cnt[p.idx[lv]]++
		p.node[lv].total++
	}
	if l.n < leafCap {
		if i == l.n-1 && l.n < len(l.keys) {
			// One key to move, as where the seed's ascending frees go in
			// before a greater key: a copy without memmove's call.
			addTreeWork(1)
			l.keys[i+1] = l.keys[i]
		} else if i < l.n-i && len(l.keys) < leafCap {
			// The keys before i move back into the room before the start.
			addTreeWork(i)
			l.keys = l.buf[leafCap-len(l.keys)-1:]
			copy(l.keys[:i], l.keys[1:i+1])
		} else if i == 0 && l.n > 0 {
			// No room before the start: the keys move to the middle of
			// buf, as many as moving them one place would, leaving room
			// for the keys that go in before them next.
			addTreeWork(l.n)
			s := (leafCap - l.n) / 2
			copy(l.buf[s+1:], l.keys[:l.n])
			l.keys = l.buf[s:]
		} else {
			l.room(l.n + 1)
			addTreeWork(l.n - i)
			copy(l.keys[i+1:l.n+1], l.keys[i:l.n])
		}
		l.keys[i] = k
		l.n++
		if i == l.n-1 && t.height > 0 {
			t.fixMax(p, l)
		}
		return true
	}
	// Split l at the insertion point, within a quarter of either end: the
	// keys from it on move to a new leaf r after it. A run of ascending
	// keys, inserted one after another, then goes on at the end of l (no
	// key moved) until l is full, where a split in halves would move half
	// the leaf for every half leaf inserted; a key at a random place
	// splits at a random place, as even on average.
	r := t.newLeaf()
	h := min(max(i, minFill), leafCap-minFill)
	addTreeWork(leafCap - h)
	copy(r.keys[:], l.keys[h:])
	clear(l.keys[h:])
	r.n, l.n = leafCap-h, h
	r.prev, r.next = l, l.next
	if l.next != nil {
		l.next.prev = r
	}
	l.next = r
	dst, di := l, i
	if i > h {
		dst, di = r, i-h
	}
	addTreeWork(dst.n - di)
	copy(dst.keys[di+1:dst.n+1], dst.keys[di:dst.n])
	dst.keys[di] = k
	dst.n++
	t.splitUp(p, l, nil, r, nil)
	// The split changed the way to the leaves: the finger is k's leaf,
	// found again, where the keys after k go on rather than at the front
	// of the leaf after (where a search for them would end).
	var fi int
	t.finger, fi = t.seek(&k, p)
	t.fidx = fi + 1
	return true
}

// follows reports whether index j of l, past its first key, is where
// insert puts k: the key before it is less than k, and the key at j is not
// (or j is l's end, and k sorts before the next leaf's keys, as holds
// asks).
func (l *kLeaf) follows(j int, k *freeKey) bool {
	if j <= 0 || j > l.n || !less(&l.keys[j-1], k) {
		return false
	}
	if j < l.n {
		return !less(&l.keys[j], k)
	}
	return l.next == nil || less(k, &l.next.keys[0])
}

// holds reports whether k sorts after every key of the leaves before l and
// before every key of those after it: the keys insert may put in l, which
// is where a seek of k would end or the end of the leaf before that one.
func (l *kLeaf) holds(k *freeKey) bool {
	return (l.prev == nil || less(&l.prev.keys[l.prev.n-1], k)) && (l.next == nil || less(k, &l.next.keys[0]))
}

// search returns the index of the first key of l not less than k (l.n if
// none).
func (l *kLeaf) search(k *freeKey) int {
	lo, hi := 0, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if less(&l.keys[m], k) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// splitUp puts the new right sibling of the child p leads to at depth
// t.height (a leaf: ll, rl) or above (li, ri) beside it in its parent,
// splitting full parents up to the root.
func (t *kTree) splitUp(p *kPath, ll *kLeaf, li *kInner, rl *kLeaf, ri *kInner) {
	for lv := t.height - 1; lv >= 0; lv-- {
		nd, j := p.node[lv], p.idx[lv]
		lm, lc := t.sumOf(lv+1, ll, li)
		rm, rc := t.sumOf(lv+1, rl, ri)
		nd.max[j], nd.cnt[j] = lm, lc
		if nd.n < fanCap {
			nd.insertChild(j+1, rm, rc, rl, ri)
			t.fixMaxFrom(p, lv)
			return
		}
		// Split nd: its upper half moves to a new inner node after it.
		nr := t.newInner()
		h := fanCap / 2
		addTreeWork(fanCap - h)
		copy(nr.max[:], nd.max[h:])
		copy(nr.cnt[:], nd.cnt[h:])
		copy(nr.leaf[:], nd.leaf[h:])
		copy(nr.kid[:], nd.kid[h:])
		clear(nd.max[h:])
		clear(nd.cnt[h:])
		clear(nd.leaf[h:])
		clear(nd.kid[h:])
		nr.n, nd.n = fanCap-h, h
		if j+1 <= h {
			nd.insertChild(j+1, rm, rc, rl, ri)
		} else {
			nr.insertChild(j+1-h, rm, rc, rl, ri)
		}
		nd.recount()
		nr.recount()
		ll, li, rl, ri = nil, nd, nil, nr
	}
	// The root split: a new root above the two halves.
	root := t.newInner()
	lm, lc := t.sumOf(0, ll, li)
	rm, rc := t.sumOf(0, rl, ri)
	root.max[0], root.cnt[0], root.leaf[0], root.kid[0] = lm, lc, ll, li
	root.max[1], root.cnt[1], root.leaf[1], root.kid[1] = rm, rc, rl, ri
	root.n, root.total = 2, lc+rc
	t.inner, t.leaf = root, nil
	t.height++
}

// fixMaxFrom sets the greatest key of the node at depth lv of p in its
// ancestors while it is their last child's.
func (t *kTree) fixMaxFrom(p *kPath, lv int) {
	m := p.node[lv].max[p.node[lv].n-1]
	for up := lv - 1; up >= 0; up-- {
		u, uj := p.node[up], p.idx[up]
		u.max[uj] = m
		if uj != u.n-1 {
			return
		}
	}
}

// sumOf is the greatest key and count of a node at depth lv: a leaf if lv
// is the height, else an inner node.
func (t *kTree) sumOf(lv int, l *kLeaf, in *kInner) (freeKey, int) {
	if lv == t.height {
		return l.keys[l.n-1], l.n
	}
	return in.max[in.n-1], in.total
}

func (nd *kInner) insertChild(j int, m freeKey, c int, l *kLeaf, in *kInner) {
	addTreeWork(nd.n - j)
	copy(nd.max[j+1:nd.n+1], nd.max[j:nd.n])
	copy(nd.cnt[j+1:nd.n+1], nd.cnt[j:nd.n])
	copy(nd.leaf[j+1:nd.n+1], nd.leaf[j:nd.n])
	copy(nd.kid[j+1:nd.n+1], nd.kid[j:nd.n])
	nd.max[j], nd.cnt[j], nd.leaf[j], nd.kid[j] = m, c, l, in
	nd.n++
}

func (nd *kInner) removeChild(j int) {
	addTreeWork(nd.n - j)
	copy(nd.max[j:], nd.max[j+1:nd.n])
	copy(nd.cnt[j:], nd.cnt[j+1:nd.n])
	copy(nd.leaf[j:], nd.leaf[j+1:nd.n])
	copy(nd.kid[j:], nd.kid[j+1:nd.n])
	nd.n--
	nd.max[nd.n], nd.cnt[nd.n], nd.leaf[nd.n], nd.kid[nd.n] = freeKey{}, 0, nil, nil
}

func (nd *kInner) recount() {
	nd.total = 0
	for _, c := range nd.cnt[:nd.n] {
		nd.total += c
	}
}

// delete removes k if present; it reports whether it was.
func (t *kTree) delete(k freeKey) bool {
	if t.n == 0 {
		return false
	}
	var p kPath
	l, i := t.seek(&k, &p)
	if i == l.n || less(&k, &l.keys[i]) {
		return false
	}
	t.deleteAt(&p, l, i)
	return true
}

// deleteRank removes the key of rank r < n.
func (t *kTree) deleteRank(r int) {
	var p kPath
	l, i := t.seekRank(r, &p)
	t.deleteAt(&p, l, i)
}

// takeFirst removes the first key, n > 0, and returns it: at(0) and
// deleteRank(0) in one descent.
func (t *kTree) takeFirst() freeKey {
	var p kPath
	l, _ := t.seekRank(0, &p)
	k := l.keys[0]
	t.deleteAt(&p, l, 0)
	return k
}

// deleteAt removes index i of the leaf l that p leads to, then merges or
// balances the nodes left less than a quarter full with a sibling.
func (t *kTree) deleteAt(p *kPath, l *kLeaf, i int) {
	t.finger = nil // a merge or a balance may change the way to the leaves
	t.n--
	if i < l.n-1-i {
		// The keys before i move one place on, and the start with them.
		addTreeWork(i)
		copy(l.keys[1:i+1], l.keys[:i])
		l.keys = l.keys[1:]
	} else {
		addTreeWork(l.n - 1 - i)
		copy(l.keys[i:], l.keys[i+1:l.n])
		l.keys[l.n-1] = freeKey{}
	}
	l.n--
	for lv := 0; lv < t.height; lv++ {
		p.node[lv].cnt[p.idx[lv]]--
		p.node[lv].total--
	}
	if t.height == 0 {
		return
	}
	if i == l.n && l.n > 0 {
		t.fixMax(p, l)
	}
	if l.n >= minFill {
		return
	}
	// l is short: merge it with a sibling, or take keys from one.
	lv := t.height - 1
	nd, j := p.node[lv], p.idx[lv]
	if nd.n > 1 {
		a := j - 1
		if j == 0 {
			a = 0
		}
		x, y := nd.leaf[a], nd.leaf[a+1]
		if x.n+y.n <= leafCap {
			addTreeWork(y.n)
			x.room(x.n + y.n)
			copy(x.keys[x.n:], y.keys[:y.n])
			x.n += y.n
			x.next = y.next
			if y.next != nil {
				y.next.prev = x
			}
			nd.max[a], nd.cnt[a] = x.keys[x.n-1], x.n
			nd.removeChild(a + 1)
			if len(t.spare) < 8 {
				t.spare = append(t.spare, y)
			}
		} else {
			balanceLeaves(x, y)
			nd.max[a], nd.cnt[a] = x.keys[x.n-1], x.n
			nd.max[a+1], nd.cnt[a+1] = y.keys[y.n-1], y.n
		}
	}
	// Inner nodes left short, bottom up.
	for lv--; lv >= 0 && nd.n < minFill; lv-- {
		up, j := p.node[lv], p.idx[lv]
		if up.n > 1 {
			a := j - 1
			if j == 0 {
				a = 0
			}
			x, y := up.kid[a], up.kid[a+1]
			if x.n+y.n <= fanCap {
				addTreeWork(y.n)
				copy(x.max[x.n:], y.max[:y.n])
				copy(x.cnt[x.n:], y.cnt[:y.n])
				copy(x.leaf[x.n:], y.leaf[:y.n])
				copy(x.kid[x.n:], y.kid[:y.n])
				x.n += y.n
				x.total += y.total
				up.max[a], up.cnt[a] = x.max[x.n-1], x.total
				up.removeChild(a + 1)
			} else {
				balanceInner(x, y)
				up.max[a], up.cnt[a] = x.max[x.n-1], x.total
				up.max[a+1], up.cnt[a+1] = y.max[y.n-1], y.total
			}
		}
		nd = up
	}
	// A root of one child gives way to it.
	for t.height > 0 && t.inner.n == 1 {
		if t.height == 1 {
			t.leaf, t.inner = t.inner.leaf[0], nil
		} else {
			t.inner = t.inner.kid[0]
		}
		t.height--
	}
}

// balanceLeaves shares the keys of the neighbouring leaves x and y evenly.
func balanceLeaves(x, y *kLeaf) {
	tot := x.n + y.n
	h := tot / 2
	if x.n > h { // x gives its last keys to y's front
		d := x.n - h
		addTreeWork(y.n + d)
		y.room(y.n + d)
		copy(y.keys[d:], y.keys[:y.n])
		copy(y.keys[:d], x.keys[h:x.n])
		clear(x.keys[h:x.n])
	} else { // y gives its first keys to x's end
		d := h - x.n
		addTreeWork(d)
		x.room(h)
		copy(x.keys[x.n:], y.keys[:d])
		y.keys = y.keys[d:] // y's start moves past them
	}
	x.n, y.n = h, tot-h
}

// balanceInner shares the children of the neighbouring inner nodes x and y
// evenly.
func balanceInner(x, y *kInner) {
	tot := x.n + y.n
	h := tot / 2
	moveInner(x, y, h)
	x.recount()
	y.recount()
}

func moveInner(x, y *kInner, h int) {
	addTreeWork(x.n + y.n)
	var all struct {
		max  [2 * fanCap]freeKey
		cnt  [2 * fanCap]int
		leaf [2 * fanCap]*kLeaf
		kid  [2 * fanCap]*kInner
	}
	n := x.n
	copy(all.max[:], x.max[:n])
	copy(all.cnt[:], x.cnt[:n])
	copy(all.leaf[:], x.leaf[:n])
	copy(all.kid[:], x.kid[:n])
	copy(all.max[n:], y.max[:y.n])
	copy(all.cnt[n:], y.cnt[:y.n])
	copy(all.leaf[n:], y.leaf[:y.n])
	copy(all.kid[n:], y.kid[:y.n])
	tot := n + y.n
	*x, *y = kInner{}, kInner{}
	copy(x.max[:], all.max[:h])
	copy(x.cnt[:], all.cnt[:h])
	copy(x.leaf[:], all.leaf[:h])
	copy(x.kid[:], all.kid[:h])
	copy(y.max[:], all.max[h:tot])
	copy(y.cnt[:], all.cnt[h:tot])
	copy(y.leaf[:], all.leaf[h:tot])
	copy(y.kid[:], all.kid[h:tot])
	x.n, y.n = h, tot-h
}

// rekey replaces key old, which must be present, with nk, which sorts
// where old does (no key lies between them).
func (t *kTree) rekey(old, nk freeKey) {
	var p kPath
	l, i := t.seek(&old, &p)
	l.keys[i] = nk
	if i == l.n-1 && t.height > 0 {
		t.fixMax(&p, l)
	}
}

// first is the leftmost leaf (nil when the tree was never filled).
func (t *kTree) first() *kLeaf {
	if t.height == 0 {
		return t.leaf
	}
	nd := t.inner
	for lv := 0; lv < t.height-1; lv++ {
		nd = nd.kid[0]
	}
	return nd.leaf[0]
}

// clearKeep empties t, keeping up to a few leaves for newLeaf.
func (t *kTree) clearKeep() {
	sp := t.spare
	for l := t.first(); l != nil && len(sp) < 8; {
		nx := l.next
		sp = append(sp, l)
		l = nx
	}
	*t = kTree{spare: sp, nodes: t.nodes}
}
