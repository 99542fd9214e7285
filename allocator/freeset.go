package allocator

// freeSet is an ordered set of freeKeys: a BlockPool's `unmapped` (its
// `blocks`, on the hot path, are a sizeSet). It is a kTree, whose leaves
// are the sorted chunks of at most leafCap keys that a flat list held
// before; the tree above them keeps every update O(log n). A nil set is
// empty to the readers (Len and the walks).
type freeSet struct {
	t kTree
}

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
func (s *freeSet) Len() int {
	if s == nil {
		return 0
	}
	return s.t.n
}

// ReplaceOrInsert adds k (replacing an equal key).
func (s *freeSet) ReplaceOrInsert(k freeKey) { s.t.insert(k) }

// Delete removes k if present.
func (s *freeSet) Delete(k freeKey) { s.t.delete(k) }

// Rekey replaces key old, which must be present, with nk, which must sort
// where old does: no key of the set lies between them. mapBlock moves an
// unmapped block's key to the rest it leaves unmapped this way, in place,
// where a Delete and an insertion would each move keys.
func (s *freeSet) Rekey(old, nk freeKey) { s.t.rekey(old, nk) }

// AscendGreaterOrEqual calls fn on each key not less than pivot, in order,
// until fn returns false.
func (s *freeSet) AscendGreaterOrEqual(pivot freeKey, fn func(freeKey) bool) {
	if s == nil || s.t.n == 0 {
		return
	}
	var p kPath
	l, i := s.t.seek(&pivot, &p)
	for ; l != nil; l, i = l.next, 0 {
		for ; i < l.n; i++ {
			if !fn(l.keys[i]) {
				return
			}
		}
	}
}

// Ascend calls fn on every key in order until it returns false. fn must not
// modify the set.
func (s *freeSet) Ascend(fn func(freeKey) bool) {
	if s == nil || s.t.n == 0 {
		return
	}
	for l := s.t.first(); l != nil; l = l.next {
		for _, k := range l.keys[:l.n] {
			if !fn(k) {
				return
			}
		}
	}
}

// DescendLessOrEqual calls fn on each key not greater than pivot, in
// descending order, until fn returns false.
func (s *freeSet) DescendLessOrEqual(pivot freeKey, fn func(freeKey) bool) {
	if s == nil || s.t.n == 0 {
		return
	}
	var p kPath
	l, i := s.t.seek(&pivot, &p)
	if i == l.n || less(&pivot, &l.keys[i]) {
		i-- // the last key below pivot
	}
	for l != nil {
		for ; i >= 0; i-- {
			if !fn(l.keys[i]) {
				return
			}
		}
		if l = l.prev; l != nil {
			i = l.n - 1
		}
	}
}
