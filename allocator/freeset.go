package allocator

import "slices"

// freeSet is an ordered set of freeKeys (a BlockPool's `unmapped`; its
// `blocks`, on the hot path, are a sizeSet): a sorted list of sorted chunks of at most chunkMax keys. It
// replaces a general B-tree on the hot path because its comparisons inline;
// lookups are two binary searches, updates move at most chunkMax keys.
type freeSet struct {
	chunks [][]freeKey
	tails  []freeKey // tails[i] is the last key of chunks[i], searched contiguously
	n      int
	// spare holds emptied chunks for reuse: an expandable segment's unmapped
	// set empties and fills again all the time, and must not allocate a
	// chunk each time.
	spare [][]freeKey
}

// newChunk returns an empty chunk of capacity chunkMax.
func (s *freeSet) newChunk() []freeKey {
	if n := len(s.spare); n > 0 {
		c := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return c[:0]
	}
	return make([]freeKey, 0, chunkMax)
}

const chunkMax = 64

func less(a, b *freeKey) bool {
	if a.stream != b.stream {
		return a.stream < b.stream
	}
	if a.size != b.size {
		return a.size < b.size
	}
	return a.addr < b.addr
}

// Len returns the number of keys.
func (s *freeSet) Len() int { return s.n }

// seek returns the chunk and index of the first key not less than k
// (ci == len(chunks) when there is none).
func (s *freeSet) seek(k *freeKey) (ci, i int) {
	lo, hi := 0, len(s.tails)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if less(&s.tails[m], k) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(s.chunks) {
		return lo, 0
	}
	c := s.chunks[lo]
	a, b := 0, len(c)
	for a < b {
		m := int(uint(a+b) >> 1)
		if less(&c[m], k) {
			a = m + 1
		} else {
			b = m
		}
	}
	return lo, a
}

// ReplaceOrInsert adds k (replacing an equal key).
func (s *freeSet) ReplaceOrInsert(k freeKey) {
	ci, i := s.seek(&k)
	if ci == len(s.chunks) {
		if ci == 0 {
			s.chunks = append(s.chunks, s.newChunk())
			s.tails = append(s.tails, freeKey{})
		}
		ci = len(s.chunks) - 1
		i = len(s.chunks[ci])
	}
	c := s.chunks[ci]
	if i < len(c) && !less(&k, &c[i]) {
		c[i] = k
		s.tails[ci] = c[len(c)-1]
		return
	}
	s.n++
	if len(c) < chunkMax {
		c = slices.Insert(c, i, k)
		s.chunks[ci] = c
		s.tails[ci] = c[len(c)-1]
		return
	}
	// Split the full chunk in two halves, then insert.
	right := s.newChunk()[:chunkMax/2]
	copy(right, c[chunkMax/2:])
	c = c[:chunkMax/2]
	s.chunks[ci] = c
	s.chunks = slices.Insert(s.chunks, ci+1, right)
	s.tails = slices.Insert(s.tails, ci+1, freeKey{})
	if i <= chunkMax/2 {
		c = slices.Insert(c, i, k)
		s.chunks[ci] = c
	} else {
		right = slices.Insert(right, i-chunkMax/2, k)
		s.chunks[ci+1] = right
	}
	s.tails[ci] = s.chunks[ci][len(s.chunks[ci])-1]
	s.tails[ci+1] = s.chunks[ci+1][len(s.chunks[ci+1])-1]
}

// Delete removes k if present.
func (s *freeSet) Delete(k freeKey) {
	ci, i := s.seek(&k)
	if ci == len(s.chunks) {
		return
	}
	c := s.chunks[ci]
	if i >= len(c) || less(&k, &c[i]) {
		return
	}
	s.deleteAt(ci, i)
}

// Rekey replaces key old, which must be present, with nk, which must sort
// where old does: no key of the set lies between them. mapBlock moves an
// unmapped block's key to the rest it leaves unmapped this way, in place,
// where a Delete and an insertion would each move half a chunk.
func (s *freeSet) Rekey(old, nk freeKey) {
	ci, i := s.seek(&old)
	c := s.chunks[ci]
	c[i] = nk
	if i == len(c)-1 {
		s.tails[ci] = nk
	}
}

// deleteAt removes the key at chunk ci, index i (as returned by seek).
func (s *freeSet) deleteAt(ci, i int) {
	s.n--
	c := slices.Delete(s.chunks[ci], i, i+1)
	if len(c) == 0 {
		s.spare = append(s.spare, c)
		s.chunks = slices.Delete(s.chunks, ci, ci+1)
		s.tails = slices.Delete(s.tails, ci, ci+1)
		return
	}
	s.chunks[ci] = c
	s.tails[ci] = c[len(c)-1]
}

// AscendGreaterOrEqual calls fn on each key not less than pivot, in order,
// until fn returns false.
func (s *freeSet) AscendGreaterOrEqual(pivot freeKey, fn func(freeKey) bool) {
	ci, i := s.seek(&pivot)
	for ; ci < len(s.chunks); ci, i = ci+1, 0 {
		c := s.chunks[ci]
		for ; i < len(c); i++ {
			if !fn(c[i]) {
				return
			}
		}
	}
}

// Ascend calls fn on every key in order until it returns false. fn must not
// modify the set.
func (s *freeSet) Ascend(fn func(freeKey) bool) {
	for _, c := range s.chunks {
		for _, k := range c {
			if !fn(k) {
				return
			}
		}
	}
}

// DescendLessOrEqual calls fn on each key not greater than pivot, in
// descending order, until fn returns false.
func (s *freeSet) DescendLessOrEqual(pivot freeKey, fn func(freeKey) bool) {
	ci, i := s.seek(&pivot)
	// Step to the last key <= pivot.
	if ci < len(s.chunks) && i < len(s.chunks[ci]) && !less(&pivot, &s.chunks[ci][i]) {
		// s.chunks[ci][i] == pivot: include it.
	} else {
		i--
	}
	if ci == len(s.chunks) {
		ci--
		if ci < 0 {
			return
		}
		i = len(s.chunks[ci]) - 1
	}
	for ; ci >= 0; ci-- {
		c := s.chunks[ci]
		if i >= len(c) {
			i = len(c) - 1
		}
		for ; i >= 0; i-- {
			if !fn(c[i]) {
				return
			}
		}
		if ci > 0 {
			i = len(s.chunks[ci-1]) - 1
		}
	}
}
