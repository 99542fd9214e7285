package allocator

// streamUses is stream_uses of the allocated blocks that record_stream
// named other streams for: a list of streams a block, kept in one table
// indexed by block id and a pool of entries, not a map, so that a use costs
// no hashing and the memory a pending block holds is a few bytes of tables
// that later blocks of the same ids reuse. A block's streams are in no
// order: free counts them and recordStream asks whether one is there.
type streamUses struct {
	head []int32    // by blockID: 1 + the index in ent of the block's first use; 0: none
	ent  []useEntry // the lists' entries; a taken list's go onto free
	free int32      // 1 + the first entry of the free list; 0: none
}

type useEntry struct {
	stream uint64
	next   int32 // 1 + the index of the list's next entry; 0: the last
}

// add adds stream to block id's list unless it is there; it reports
// whether it added it.
func (u *streamUses) add(id blockID, stream uint64) bool {
	if int(id) >= len(u.head) {
		u.head = growTable(u.head, int(id))
	}
	for i := u.head[id]; i != 0; i = u.ent[i-1].next {
		if u.ent[i-1].stream == stream {
			return false
		}
	}
	e := useEntry{stream, u.head[id]}
	if i := u.free; i != 0 {
		u.free = u.ent[i-1].next
		u.ent[i-1] = e
		u.head[id] = i
	} else {
		u.ent = append(u.ent, e)
		u.head[id] = int32(len(u.ent))
	}
	return true
}

// take empties block id's list and returns how many streams it held.
func (u *streamUses) take(id blockID) int32 {
	if int(id) >= len(u.head) {
		return 0
	}
	n, i := int32(0), u.head[id]
	for i != 0 {
		n++
		next := u.ent[i-1].next
		u.ent[i-1].next = u.free
		u.free = i
		i = next
	}
	u.head[id] = 0
	return n
}

// reset empties every list, keeping the tables' memory (growTable
// clears what it takes back).
func (u *streamUses) reset() {
	u.head, u.ent, u.free = u.head[:0], u.ent[:0], 0
}

// growTable returns t grown to hold index i, at least doubled, the new
// entries 0.
func growTable(t []int32, i int) []int32 {
	n := max(2*len(t), i+1, 64)
	if n <= cap(t) {
		old := len(t)
		t = t[:n]
		clear(t[old:])
		return t
	}
	g := make([]int32, n)
	copy(g, t)
	return g
}

// setPendAt notes that block id is at place i of pending.
func (a *Allocator) setPendAt(id blockID, i int) {
	if int(id) >= len(a.pendAt) {
		a.pendAt = growTable(a.pendAt, int(id))
	}
	a.pendAt[id] = int32(i)
}
