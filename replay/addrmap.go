package replay

import "math/bits"

// addrMap maps recorded block addresses to replayed ones: open addressing
// with linear probing and backward-shift deletion, keyed by Fibonacci hashing
// (addresses are 512-aligned, so the low bits carry nothing). Key 0 is kept
// aside. It replaces a Go map on the per-event path.
type addrMap struct {
	slots   []amSlot // power-of-two length; key 0 marks an empty slot
	shift   uint     // 64 - log2(len(slots))
	n       int
	zero    uint64 // the value of key 0
	hasZero bool
}

type amSlot struct{ key, val uint64 }

const fib = 0x9E3779B97F4A7C15

func newAddrMap() addrMap { return addrMap{slots: make([]amSlot, 64), shift: 64 - 6} }

func (m *addrMap) home(k uint64) uint64 { return (k * fib) >> m.shift }

func (m *addrMap) get(k uint64) (uint64, bool) {
	if k == 0 {
		return m.zero, m.hasZero
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == k {
			return s.val, true
		}
		if s.key == 0 {
			return 0, false
		}
	}
}

func (m *addrMap) put(k, v uint64) {
	if k == 0 {
		m.zero, m.hasZero = v, true
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

func (m *addrMap) del(k uint64) { m.take(k) }

// take removes k and returns its value.
func (m *addrMap) take(k uint64) (uint64, bool) {
	if k == 0 {
		v, ok := m.zero, m.hasZero
		m.zero, m.hasZero = 0, false
		return v, ok
	}
	mask := uint64(len(m.slots) - 1)
	i := m.home(k)
	for {
		s := &m.slots[i]
		if s.key == k {
			break
		}
		if s.key == 0 {
			return 0, false
		}
		i = (i + 1) & mask
	}
	v := m.slots[i].val
	m.n--
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
	m.slots[i] = amSlot{}
	return v, true
}

func (m *addrMap) grow() {
	old := m.slots
	m.slots = make([]amSlot, 2*len(old))
	m.shift = 64 - uint(bits.TrailingZeros(uint(len(m.slots))))
	m.n = 0
	for _, s := range old {
		if s.key != 0 {
			m.put(s.key, s.val)
		}
	}
}
