package torchsnap

import "math/bits"

// addrTable maps addresses to values of type V: open addressing with linear
// probing and backward-shift deletion, keyed by Fibonacci hashing (addresses
// are 512-aligned, so their low bits carry nothing). Reconstruction and
// validation do a lookup or two per event, and a Go map of pointers costs
// several times more (hashing, and an allocation per re-created block).
type addrTable[V any] struct {
	slots []atSlot[V] // power-of-two length; key 0 marks an empty slot
	shift uint        // 64 - log2(len(slots))
	n     int
	zero  V // the value of key 0, kept aside
	hasZ  bool
}

type atSlot[V any] struct {
	key uint64
	val V
}

const fib = 0x9E3779B97F4A7C15

func (m *addrTable[V]) home(k uint64) uint64 { return (k * fib) >> m.shift }

// len returns the number of entries.
func (m *addrTable[V]) len() int {
	if m.hasZ {
		return m.n + 1
	}
	return m.n
}

// ref returns a pointer to k's value (valid until the next put or del), or
// nil if k is absent.
func (m *addrTable[V]) ref(k uint64) *V {
	if k == 0 {
		if m.hasZ {
			return &m.zero
		}
		return nil
	}
	if m.n == 0 {
		return nil
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == k {
			return &s.val
		}
		if s.key == 0 {
			return nil
		}
	}
}

// get returns k's value and whether k is present.
func (m *addrTable[V]) get(k uint64) (V, bool) {
	if p := m.ref(k); p != nil {
		return *p, true
	}
	var zero V
	return zero, false
}

// put sets k to v.
func (m *addrTable[V]) put(k uint64, v V) {
	if k == 0 {
		m.zero, m.hasZ = v, true
		return
	}
	if 2*(m.n+1) > len(m.slots) {
		m.grow()
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == k {
			s.val = v
			return
		}
		if s.key == 0 {
			s.key, s.val = k, v
			m.n++
			return
		}
	}
}

// del removes k.
func (m *addrTable[V]) del(k uint64) {
	if k == 0 {
		var zero V
		m.zero, m.hasZ = zero, false
		return
	}
	if m.n == 0 {
		return
	}
	mask := uint64(len(m.slots) - 1)
	i := m.home(k)
	for {
		s := &m.slots[i]
		if s.key == k {
			break
		}
		if s.key == 0 {
			return
		}
		i = (i + 1) & mask
	}
	m.n--
	// Shift back the entries that probed past i.
	j := i
	for {
		j = (j + 1) & mask
		s := m.slots[j]
		if s.key == 0 {
			break
		}
		if (j-m.home(s.key))&mask >= (j-i)&mask {
			m.slots[i] = s
			i = j
		}
	}
	m.slots[i] = atSlot[V]{}
}

func (m *addrTable[V]) grow() {
	old := m.slots
	size := max(64, 2*len(old))
	m.slots = make([]atSlot[V], size)
	m.shift = 64 - uint(bits.TrailingZeros(uint(size)))
	m.n = 0
	for _, s := range old {
		if s.key != 0 {
			m.put(s.key, s.val)
		}
	}
}

// each calls fn on every entry, in no particular order.
func (m *addrTable[V]) each(fn func(k uint64, v *V)) {
	if m.hasZ {
		fn(0, &m.zero)
	}
	for i := range m.slots {
		if m.slots[i].key != 0 {
			fn(m.slots[i].key, &m.slots[i].val)
		}
	}
}
