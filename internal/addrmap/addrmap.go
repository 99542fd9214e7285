// Package addrmap is a hash map from device addresses to values, for the
// per-event paths of the allocator model, replay and snapshot
// reconstruction, where a Go map costs several times more (its hashing, and
// an allocation per entry for values held by pointer).
//
// It is open addressing with linear probing and backward-shift deletion
// (no tombstones, so long runs of frees do not slow later lookups), kept at
// most 3/8 full, or 3/4 once large (bigSlots). Keys are hashed by Fibonacci
// hashing, twice, with the product's halves folded between (home): block
// addresses are 512-aligned, so their low bits carry nothing, and the
// addresses of one run's blocks or segments are often an arithmetic
// progression, which one multiplication spreads unevenly. Key 0 marks an
// empty slot and is kept aside.
package addrmap

import (
	"math/bits"
	"unsafe"

	"github.com/tracer-dev/tracer/internal/grow"
)

// Map maps uint64 addresses to values of type V. The zero Map is empty and
// ready to use. It is not safe for concurrent use.
type Map[V any] struct {
	slots []slot[V] // power-of-two length; key 0 marks an empty slot
	shift uint      // 64 - log2(len(slots))
	n     int       // keys in slots
	limit int       // the most keys slots holds before it grows
	zero  V         // the value of key 0
	hasZ  bool
	// later is the keys ReserveOff asked a table for, made in off once
	// the map grows past lateSlots (0: none asked).
	later int
	off   *grow.OffHeap
	// in, if not nil, is where every table is made (TablesIn), each
	// unmapped once the next has taken its keys.
	in *grow.OffHeap
}

type slot[V any] struct {
	key uint64
	val V
}

const fib = 0x9E3779B97F4A7C15

// minSlots is the table's first size.
const minSlots = 64

// The table grows when it would be more than maxLoadNum/maxLoadDen full
// (near half full, a table whose live count is just under a power of two
// makes a Take probe and shift back several slots), and from bigSlots slots
// on when it would be more than 3/4 full: a table that large is past L2
// whatever its load, so a lookup's cost is its first miss and the table's
// size is what counts (the replay's 24-byte slots are the largest share of
// its memory per live block).
const (
	maxLoadNum = 3
	maxLoadDen = 8
	bigSlots   = 1 << 16
)

// home is k's home slot. The top bits of k·fib alone put the keys of an
// arithmetic progression in clusters for some strides, whose probes grow
// with the table (segments 1 MiB apart, for one; TestStridedKeys);
// folding the product's high half into its low half and multiplying again
// spreads every stride as random keys are, for three instructions more.
// The shift is at most 58 (the table has at least minSlots slots); masking
// it to 6 bits tells the compiler so, which spares the three instructions
// a shift of 64 or more would otherwise need, on every probe and every
// entry a deletion shifts back.
func (m *Map[V]) home(k uint64) uint64 {
	h := k * fib
	h ^= h >> 32
	return (h * fib) >> (m.shift & 63)
}

// Peek returns the key in k's home slot, the first a Put, Find or Take of k
// reads (0 when the table is empty). A caller that peeks at the keys of its
// next few operations in one loop has their cache misses overlap, instead
// of taking them one after another inside the operations.
func (m *Map[V]) Peek(k uint64) uint64 {
	if len(m.slots) == 0 {
		return 0
	}
	return m.slots[m.home(k)&uint64(len(m.slots)-1)].key
}

// Len returns the number of entries.
func (m *Map[V]) Len() int {
	if m.hasZ {
		return m.n + 1
	}
	return m.n
}

// Find returns the slot of key k, for Ref and DeleteAt, or -1 when k is
// absent. A caller that looks a key up and then deletes it probes once
// instead of twice (a cache miss saved per free on the allocator's path).
// A slot is valid until the next Put or Delete.
func (m *Map[V]) Find(k uint64) int {
	if k == 0 {
		if m.hasZ {
			return len(m.slots) // the zero key's own place
		}
		return -1
	}
	if m.n == 0 {
		return -1
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == k {
			return int(i)
		}
		if s.key == 0 {
			return -1
		}
	}
}

// At returns a pointer to the value in slot i, which Find returned (not -1).
func (m *Map[V]) At(i int) *V {
	if i == len(m.slots) {
		return &m.zero
	}
	return &m.slots[i].val
}

// Ref returns a pointer to k's value, valid until the next Put or Delete,
// or nil when k is absent.
func (m *Map[V]) Ref(k uint64) *V {
	if i := m.Find(k); i >= 0 {
		return m.At(i)
	}
	return nil
}

// Get returns k's value and whether k is present.
func (m *Map[V]) Get(k uint64) (V, bool) {
	if i := m.Find(k); i >= 0 {
		return *m.At(i), true
	}
	var zero V
	return zero, false
}

// Put sets k to v.
func (m *Map[V]) Put(k uint64, v V) {
	p, _ := m.Upsert(k)
	*p = v
}

// Upsert returns a pointer to k's value, valid until the next Put or
// Delete, and whether k was present; an absent k is added with the zero
// value. A caller that adds a key unless present (the numbering's alloc)
// probes once instead of twice.
func (m *Map[V]) Upsert(k uint64) (*V, bool) {
	if k == 0 {
		had := m.hasZ
		if !had {
			var zero V
			m.zero, m.hasZ = zero, true
		}
		return &m.zero, had
	}
	if m.n >= m.limit {
		m.grow()
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == k {
			return &s.val, true
		}
		if s.key == 0 {
			s.key = k
			m.n++
			return &s.val, false
		}
	}
}

// Delete removes k, if present.
func (m *Map[V]) Delete(k uint64) {
	if i := m.Find(k); i >= 0 {
		m.deleteSlot(i)
	}
}

// Take removes k and returns the value it had.
func (m *Map[V]) Take(k uint64) (V, bool) {
	if k != 0 && m.n != 0 {
		// Find, At and deleteSlot for a key in the table, in one probe loop.
		mask := uint64(len(m.slots) - 1)
		for i := m.home(k); ; i = (i + 1) & mask {
			s := &m.slots[i]
			if s.key == k {
				v := s.val
				// deleteIndex, written out: a call less per free on the
				// replay's path.
				m.n--
				hole := i
				for j := hole; ; {
					j = (j + 1) & mask
					t := &m.slots[j]
					if t.key == 0 {
						break
					}
					if (j-m.home(t.key))&mask >= (j-hole)&mask {
						m.slots[hole] = *t
						hole = j
					}
				}
				m.slots[hole] = slot[V]{}
				return v, true
			}
			if s.key == 0 {
				var zero V
				return zero, false
			}
		}
	}
	i := m.Find(k)
	if i < 0 {
		var zero V
		return zero, false
	}
	v := *m.At(i)
	m.deleteSlot(i)
	return v, true
}

// DeleteAt removes k, which Find found in slot i. When the map has changed
// since and slot i no longer holds k, it looks k up again.
func (m *Map[V]) DeleteAt(k uint64, i int) {
	switch {
	case i == len(m.slots) && k == 0:
	case i >= 0 && i < len(m.slots) && k != 0 && m.slots[i].key == k:
	default:
		if i = m.Find(k); i < 0 {
			return
		}
	}
	m.deleteSlot(i)
}

// deleteSlot empties slot i, which holds a key, and shifts back the entries
// that probed past it, so that every key stays reachable from its home slot
// without tombstones.
func (m *Map[V]) deleteSlot(i int) {
	if i == len(m.slots) {
		var zero V
		m.zero, m.hasZ = zero, false
		return
	}
	m.deleteIndex(uint64(i))
}

// deleteIndex is deleteSlot for a slot of the table (not the zero key's).
func (m *Map[V]) deleteIndex(hole uint64) {
	mask := uint64(len(m.slots) - 1)
	m.n--
	for j := hole; ; {
		j = (j + 1) & mask
		s := &m.slots[j]
		if s.key == 0 {
			break
		}
		if (j-m.home(s.key))&mask >= (j-hole)&mask {
			m.slots[hole] = *s
			hole = j
		}
	}
	m.slots[hole] = slot[V]{}
}

// Reserve makes room for n entries in all, so that the map grows at most
// once (here) until it holds more: a caller that knows about how many keys
// it will hold skips the doublings on the way, each of which rehashes every
// entry and keeps the old table beside the new one while it does.
func (m *Map[V]) Reserve(n int) {
	if n <= m.limit {
		return
	}
	if size := sizeFor(n, len(m.slots)); size > len(m.slots) {
		m.resize(size)
	}
}

// ReserveOff is Reserve with the table made in h (grow.MakeOff: outside
// the Go heap, where the collector does not count it) and only once the
// map outgrows lateSlots slots: a map that stays small (a trace of few
// blocks live, where n was a guess of millions) then keeps a small table,
// where one made for n at once would hold a page of memory for each of
// its keys, which the hash spreads all over it. h must outlive the map's
// use of it; a table the map grows into past n is the heap's, as ever.
func (m *Map[V]) ReserveOff(n int, h *grow.OffHeap) {
	if n > m.limit {
		m.later, m.off = n, h
	}
}

// TablesIn has m make its tables in h (grow.MakeOff) from now on, and
// unmap each as it grows out of it: the collector neither counts them nor
// has to find them, and h.Release gives the last back at once. h must
// outlive every use of m.
func (m *Map[V]) TablesIn(h *grow.OffHeap) { m.in = h }

// lateSlots is the table ReserveOff's map grows to by doubling before its
// table for n: 1 MiB of 16-byte slots.
const lateSlots = bigSlots

// sizeFor is the table of at least least slots that holds n keys.
// Slots is how many slots the table of an empty map that Reserve(n) makes
// has: a caller that splits n keys among several maps weighs their tables
// by it (a small table is kept less full than a large one).
func Slots(n int) int { return sizeFor(n, 0) }

func sizeFor(n, least int) int {
	size := max(minSlots, least)
	for limitOf(size) < n {
		size *= 2
	}
	return size
}

// Pages returns the pages of m's table, for a caller that faults them in
// at once (grow.Pages.Populate) where the keys would soon reach them all
// anyway, in hash order, a fault at a time. Growing the table makes them
// stale.
func (m *Map[V]) Pages() grow.Pages { return grow.PagesOf(m.slots) }

// limitOf is the most keys a table of size slots holds before it grows.
func limitOf(size int) int {
	if size >= bigSlots {
		return size * 3 / 4
	}
	return size * maxLoadNum / maxLoadDen
}

func (m *Map[V]) grow() {
	size := max(minSlots, 2*len(m.slots))
	if m.later > 0 && size > lateSlots {
		n, h := m.later, m.off
		m.later, m.off = 0, nil
		if big := sizeFor(n, size); big > size {
			m.resizeIn(big, h)
			return
		}
	}
	m.resize(size)
}

// populateMin is the least table, in bytes, that resizeIn faults in for
// writing before its rehash (grow.Pages.Populate). The rehash's probes
// read a slot before they write one: a fresh page read first maps the
// zero page, whose write then takes a second fault, a copy, and a flush
// of the TLB of every CPU that runs one of the process's threads (6% of
// small.trace's replay, in the numbering's parts; a third of the
// import's start state). Only where the rehash moves a key for every 64
// slots or more (populateDensity), which reaches nearly every page: a
// table reserved for a guess keeps the pages its keys do not reach out
// of the resident set.
const populateMin = 64 << 10

// populateDensity: resizeIn faults a table in when it moves a key for
// every populateDensity slots or fewer.
const populateDensity = 64

// resize moves the entries to a table of size slots, a power of two that
// holds them all below its limit.
func (m *Map[V]) resize(size int) { m.resizeIn(size, nil) }

// resizeIn is resize with the table made in h, if not nil.
func (m *Map[V]) resizeIn(size int, h *grow.OffHeap) {
	old := m.slots
	if h == nil && m.in != nil {
		h = m.in
		defer grow.FreeOff(h, old) // after the rehash: h's, if made there
	}
	if h != nil {
		m.slots = grow.MakeOff[slot[V]](h, size, size, grow.AllHuge)
	} else {
		m.slots = grow.Make[slot[V]](size, size) // huge pages, before the rehash touches it
	}
	if uintptr(size)*unsafe.Sizeof(m.slots[0]) >= populateMin && m.n*populateDensity >= size {
		grow.PagesOf(m.slots).Populate(0, size)
	}
	m.shift = 64 - uint(bits.TrailingZeros(uint(size)))
	m.limit = limitOf(size)
	m.n = 0
	for _, s := range old {
		if s.key != 0 {
			m.Put(s.key, s.val)
		}
	}
}

// All calls fn on every entry, in no particular order, with a pointer to its
// value; fn must not Put or Delete.
func (m *Map[V]) All(fn func(k uint64, v *V)) {
	if m.hasZ {
		fn(0, &m.zero)
	}
	for i := range m.slots {
		if m.slots[i].key != 0 {
			fn(m.slots[i].key, &m.slots[i].val)
		}
	}
}

// Clear removes every entry and keeps the table, so that a map refilled to
// its former size (the next replay of a Replayer) allocates nothing. It
// costs a pass over the table unless the map is empty already: deletion
// leaves no tombstones, so an empty map's table is all zero.
func (m *Map[V]) Clear() {
	if m.n != 0 {
		clear(m.slots)
		m.n = 0
	}
	var zero V
	m.zero, m.hasZ = zero, false
}
