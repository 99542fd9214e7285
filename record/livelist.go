package record

import "github.com/tracer-dev/tracer/allocator"

// liveList is one workload group's live buffers, oldest first, addressed by
// position as `free` selects them. Freed entries stay in place, marked dead,
// under a Fenwick tree of the live counts, so the k-th live buffer is found
// and dropped in O(log n): a `free` of a few buffers of a long list no
// longer rewrites the list. The dead are compacted away once they outnumber
// the live, which costs O(1) amortised per free.
type liveList struct {
	addrs []uint64
	hs    []allocator.Handle // the allocator's handle of each buffer, for its calls by handle
	dead  []bool
	tree  []int32 // Fenwick tree over the live flags, 1-based (tree[0] unused)
	n     int     // live entries
	// visits counts the tree nodes touched, for the tests.
	visits int
}

// Len returns the number of live buffers.
func (l *liveList) Len() int { return l.n }

// push appends a live buffer, at addr, with handle h.
func (l *liveList) push(addr uint64, h allocator.Handle) {
	l.addrs = append(l.addrs, addr)
	l.hs = append(l.hs, h)
	l.dead = append(l.dead, false)
	i := len(l.addrs) // its 1-based index
	// tree[i] covers (i-lowbit(i), i]: the new entry plus the sums of the
	// nodes below it, which are the nodes i-1, i-2, i-4, ... down to that edge.
	v := int32(1)
	for j, low := i-1, i-(i&-i); j > low; j -= j & -j {
		v += l.tree[j]
		l.visits++
	}
	if len(l.tree) == 0 {
		l.tree = append(l.tree, 0)
	}
	l.tree = append(l.tree, v)
	l.n++
}

// index returns the slice index of the k-th live buffer (0-based).
func (l *liveList) index(k int) int {
	pos, rest := 0, int32(k+1)
	for step := highBit(len(l.addrs)); step > 0; step >>= 1 {
		l.visits++
		if next := pos + step; next < len(l.tree) && l.tree[next] < rest {
			pos = next
			rest -= l.tree[next]
		}
	}
	return pos // 1-based pos+1 is the entry; its slice index is pos
}

// at returns the address and handle at slice index i (from index).
func (l *liveList) at(i int) (uint64, allocator.Handle) { return l.addrs[i], l.hs[i] }

// drop marks slice index i dead.
func (l *liveList) drop(i int) {
	l.dead[i] = true
	l.n--
	for j := i + 1; j < len(l.tree); j += j & -j {
		l.tree[j]--
		l.visits++
	}
}

// compact removes the dead entries when they outnumber the live ones.
// It invalidates slice indexes.
func (l *liveList) compact() {
	if len(l.addrs)-l.n <= l.n+64 {
		return
	}
	out, hs := l.addrs[:0], l.hs[:0]
	for i, a := range l.addrs {
		if !l.dead[i] {
			out, hs = append(out, a), append(hs, l.hs[i])
		}
	}
	l.addrs, l.hs = out, hs
	l.dead = l.dead[:len(out)]
	clear(l.dead)
	l.tree = l.tree[:0]
	if len(out) > 0 {
		l.tree = append(l.tree, 0)
		for i := 1; i <= len(out); i++ {
			l.tree = append(l.tree, 1)
		}
		for i := 1; i <= len(out); i++ { // linear Fenwick build
			if p := i + (i & -i); p <= len(out) {
				l.tree[p] += l.tree[i]
			}
		}
	}
}

// each calls fn for every live buffer, oldest first, until fn returns false.
func (l *liveList) each(fn func(addr uint64, h allocator.Handle) bool) {
	for i, a := range l.addrs {
		if !l.dead[i] && !fn(a, l.hs[i]) {
			return
		}
	}
}

// highBit returns the largest power of two not above n, or 0.
func highBit(n int) int {
	if n <= 0 {
		return 0
	}
	b := 1
	for b<<1 <= n {
		b <<= 1
	}
	return b
}
