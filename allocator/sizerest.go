package allocator

import "slices"

// restBuf is a class's rest: a slice in descending order, with room for its
// first entries, or past restMax entries a kTree (in ascending order, the
// stream left 0), which keeps every update O(log n) in a crowded class. The
// tree goes back to a slice below restMax/4 entries.
type restBuf struct {
	s   []sEntry // empty while t is set
	t   *kTree
	buf [4]sEntry
}

// restMax is the longest flat rest (a variable only for the test that
// measures the work of the flat rest alone).
var restMax = 128

// empty empties r, keeping its slice.
func (r *restBuf) empty() { r.s, r.t = r.s[:0], nil }

func entryKey(e sEntry) freeKey { return freeKey{size: e.size, addr: e.addr, id: e.id} }

func keyEntry(k freeKey) sEntry { return sEntry{size: k.size, addr: k.addr, id: k.id} }

// flatWork counts the entries a flat rest moves and the streams a scan
// steps over or moves, for the tests that bound the work of an operation
// (see treeWork).
var flatWork int

func addFlatWork(n int) {
	if countWork {
		flatWork += n
	}
}

// atRest is at of a position i ≥ 1, out of line so that at inlines.
func (h *bin) atRest(i int) sEntry {
	if t := h.rest.t; t != nil {
		return keyEntry(t.at(i - 1))
	}
	r := h.rest.s
	return r[len(r)-i]
}

func newRest() *restBuf {
	rb := new(restBuf)
	rb.s = rb.buf[:0]
	return rb
}

// pushDown makes e, smaller than every entry, the header's entry, where
// the rest is a slice with room (pushTree otherwise). It inlines.
func (h *bin) pushDown(e sEntry) {
	if h.rest == nil {
		h.rest = newRest()
	}
	h.setRest(append(h.rest.s, h.head()))
	h.setHead(e)
}

// pushTree is pushDown where the rest is a tree or a full slice.
func (h *bin) pushTree(e sEntry, slab *pageSlab) {
	t := h.rest.t
	if t == nil {
		t = h.toTree(&slab.nodes)
	}
	t.insert(entryKey(h.head()))
	h.nrest++
	h.setHead(e)
}

// insertRest adds e, greater than the header's entry, to h's rest,
// replacing an equal entry.
func (s *sizeSet) insertRest(h *bin, e sEntry) {
	if h.rest == nil {
		h.rest = newRest()
	}
	if t := h.rest.t; t != nil {
		if t.insert(entryKey(e)) {
			s.n++
			h.nrest++
		}
		return
	}
	r := h.rest.s
	i := ge(r, e.size, e.addr)
	if i > 0 && r[i-1].is(e.size, e.addr) {
		r[i-1] = e
		return
	}
	s.n++
	if len(r) >= restMax {
		h.toTree(&s.slab.nodes).insert(entryKey(e))
		h.nrest++
		return
	}
	r = append(r, e)
	if i < len(r)-1 {
		addFlatWork(len(r) - 1 - i)
		copy(r[i+1:], r[i:])
		r[i] = e
	}
	h.setRest(r)
}

// toTree moves h's flat rest into a kTree, whose nodes come from nodes,
// and returns it.
func (h *bin) toTree(nodes *nodeSupply) *kTree {
	t := &kTree{nodes: nodes}
	r := h.rest.s
	addFlatWork(len(r))
	for i := len(r) - 1; i >= 0; i-- {
		t.insert(entryKey(r[i]))
	}
	clear(r)
	h.rest.s, h.rest.t = r[:0], t
	return t
}

// toFlat moves h's tree rest, of restMax/4 entries, back into a slice.
func (h *bin) toFlat() {
	t := h.rest.t
	r := h.rest.s[:0]
	addFlatWork(t.n)
	for l := t.first(); l != nil; l = l.next {
		for _, k := range l.keys[:l.n] {
			r = append(r, keyEntry(k))
		}
	}
	slices.Reverse(r)
	h.rest.s, h.rest.t = r, nil
}

// deleteRest removes the entry at position i of a class of more than one,
// whose rest is a slice (deleteTree otherwise). It inlines.
func (h *bin) deleteRest(i int) {
	r := h.rest.s
	n := len(r) - 1
	if i == 0 {
		h.setHead(r[n])
	} else if j := n + 1 - i; j < n {
		addFlatWork(n - j)
		copy(r[j:], r[j+1:])
	}
	h.setRest(r[:n])
}

// deleteTree is deleteRest of a class whose rest is the tree t.
func (h *bin) deleteTree(t *kTree, i int) {
	if i == 0 {
		h.setHead(keyEntry(t.takeFirst()))
	} else {
		t.deleteRank(i - 1)
	}
	h.treeShrunk()
}

// treeShrunk counts a deletion from the tree of h's rest, which goes back
// to a slice once it is short.
func (h *bin) treeShrunk() {
	h.nrest--
	if int(h.nrest) <= restMax/4 {
		h.toFlat()
	}
}

// keyRest is key of a position i ≥ 1, out of line so that key inlines.
//
//go:noinline
func (h *bin) keyRest(st uint64, i int) freeKey {
	e := h.atRest(i)
	return freeKey{stream: st, size: e.size, addr: e.addr, id: e.id}
}
