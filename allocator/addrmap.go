package allocator

import "math/bits"

// addrMap maps block addresses to block ids: open addressing with linear
// probing and backward-shift deletion, keyed by Fibonacci hashing (addresses
// are 512-aligned, so the low bits carry nothing). Key 0 is kept aside.
type addrMap struct {
	slots []amSlot // power-of-two length; key 0 marks an empty slot
	shift uint     // 64 - log2(len(slots))
	n     int
	zero  blockID // the value of key 0; 0 when absent
}

type amSlot struct {
	key uint64
	val blockID
}

const fib = 0x9E3779B97F4A7C15

func newAddrMap() addrMap {
	return addrMap{slots: make([]amSlot, 64), shift: 64 - 6}
}

func (m *addrMap) home(k uint64) uint64 { return (k * fib) >> m.shift }

// get returns the id at addr k, 0 if none.
func (m *addrMap) get(k uint64) blockID {
	if k == 0 {
		return m.zero
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == k {
			return s.val
		}
		if s.key == 0 {
			return 0
		}
	}
}

// lookup returns the id at addr k (0 if none) and its slot, for a later
// delAt: a synchronous free looks the block up and removes it, and probing
// once instead of twice saves a cache miss per free. The slot is -1 for key
// 0 or a missing key.
func (m *addrMap) lookup(k uint64) (blockID, int) {
	if k == 0 {
		return m.zero, -1
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == k {
			return s.val, int(i)
		}
		if s.key == 0 {
			return 0, -1
		}
	}
}

// delAt removes addr k, found by lookup at slot i. It checks the slot still
// holds k (the map may have changed since) and falls back to del.
func (m *addrMap) delAt(k uint64, i int) {
	if i < 0 || i >= len(m.slots) || m.slots[i].key != k {
		m.del(k)
		return
	}
	m.delSlot(uint64(i))
}

// put sets addr k to id v (v != 0).
func (m *addrMap) put(k uint64, v blockID) {
	if k == 0 {
		m.zero = v
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

// del removes addr k.
func (m *addrMap) del(k uint64) {
	if k == 0 {
		m.zero = 0
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
	m.delSlot(i)
}

// delSlot empties slot i, which holds a key.
func (m *addrMap) delSlot(i uint64) {
	mask := uint64(len(m.slots) - 1)
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
	m.slots[i] = amSlot{}
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

// each calls fn on every entry.
func (m *addrMap) each(fn func(k uint64, v blockID)) {
	if m.zero != 0 {
		fn(0, m.zero)
	}
	for _, s := range m.slots {
		if s.key != 0 {
			fn(s.key, s.val)
		}
	}
}
