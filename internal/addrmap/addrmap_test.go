package addrmap

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/tracer-dev/tracer/internal/cputime"
	"github.com/tracer-dev/tracer/internal/grow"
)

// check applies one operation to m and to the reference Go map, and
// compares what they say about k.
func check(t *testing.T, step int, m *Map[uint32], ref map[uint64]uint32, op byte, k uint64, v uint32) {
	t.Helper()
	switch op % 7 {
	case 0, 1:
		m.Put(k, v)
		ref[k] = v
	case 6: // insert unless present, as the numbering's alloc does
		p, ok := m.Upsert(k)
		want, wok := ref[k]
		if ok != wok || *p != want {
			t.Fatalf("step %d: Upsert(%#x) = %d %v, want %d %v", step, k, *p, ok, want, wok)
		}
		if !ok {
			*p = v
			ref[k] = v
		}
	case 2:
		m.Delete(k)
		delete(ref, k)
	case 3:
		got, ok := m.Take(k)
		want, wok := ref[k]
		if got != want || ok != wok {
			t.Fatalf("step %d: Take(%#x) = %d %v, want %d %v", step, k, got, ok, want, wok)
		}
		delete(ref, k)
	case 4: // find, then delete at the slot found, as the allocator frees
		i := m.Find(k)
		if _, ok := ref[k]; ok != (i >= 0) {
			t.Fatalf("step %d: Find(%#x) = %d, present %v", step, k, i, ok)
		}
		if i >= 0 {
			if got := *m.At(i); got != ref[k] {
				t.Fatalf("step %d: At(Find(%#x)) = %d, want %d", step, k, got, ref[k])
			}
			m.DeleteAt(k, i)
			delete(ref, k)
		}
	case 5: // room for up to 4095 more, then every entry still there
		m.Reserve(m.Len() + int(v%4096))
		if m.n > m.limit {
			t.Fatalf("step %d: %d entries past the limit %d after Reserve", step, m.n, m.limit)
		}
		all(t, m, ref)
	}
	got, ok := m.Get(k)
	want, wok := ref[k]
	if got != want || ok != wok {
		t.Fatalf("step %d: Get(%#x) = %d %v, want %d %v", step, k, got, ok, want, wok)
	}
	if m.Len() != len(ref) {
		t.Fatalf("step %d: Len = %d, want %d", step, m.Len(), len(ref))
	}
}

// all checks that All visits exactly the reference's entries.
func all(t *testing.T, m *Map[uint32], ref map[uint64]uint32) {
	t.Helper()
	n := 0
	m.All(func(k uint64, v *uint32) {
		n++
		if want, ok := ref[k]; !ok || *v != want {
			t.Fatalf("All: entry %#x=%d, want %d (present %v)", k, *v, want, ok)
		}
	})
	if n != len(ref) {
		t.Fatalf("All: %d entries, want %d", n, len(ref))
	}
}

// TestAgainstGoMap drives the map with random operations on clustered,
// aligned keys (block addresses within segments, segment bases, and key 0)
// and compares it with a Go map after each.
func TestAgainstGoMap(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var m Map[uint32]
	ref := map[uint64]uint32{}
	for step := range 300000 {
		k := uint64(rng.Intn(3000)) << 9
		switch rng.Intn(8) {
		case 0:
			k = uint64(rng.Intn(3000))<<21 | 1<<47
		case 1:
			k = uint64(rng.Intn(2)) // 0 is kept aside
		}
		op := byte(rng.Intn(6))
		if op == 5 {
			op = 6 // Upsert; Reserve checks every entry, too slow this often
		}
		check(t, step, &m, ref, op, k, uint32(rng.Intn(1000)))
		if step%10000 == 0 {
			all(t, &m, ref)
		}
	}
	all(t, &m, ref)
}

// TestDeleteAtStale checks that DeleteAt with a slot from before the map
// changed still deletes the right key.
func TestDeleteAtStale(t *testing.T) {
	var m Map[uint32]
	for k := uint64(1); k <= 40; k++ {
		m.Put(k<<9, uint32(k))
	}
	i := m.Find(7 << 9)
	for k := uint64(41); k <= 200; k++ { // grows the table: slots move
		m.Put(k<<9, uint32(k))
	}
	m.DeleteAt(7<<9, i)
	if _, ok := m.Get(7 << 9); ok {
		t.Fatal("key still present after DeleteAt with a stale slot")
	}
	if m.Len() != 199 {
		t.Fatalf("Len = %d, want 199", m.Len())
	}
	for k := uint64(1); k <= 200; k++ {
		if v, ok := m.Get(k << 9); ok != (k != 7) || (ok && v != uint32(k)) {
			t.Fatalf("Get(%#x) = %d %v", k<<9, v, ok)
		}
	}
}

// FuzzMap runs operation sequences from the fuzzer: each 9 bytes are an
// operation and a key (narrowed so that keys collide), checked against a Go
// map.
func FuzzMap(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0, 0, 0, 0, 0, 0, 4, 0, 2, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Map[uint32]
		ref := map[uint64]uint32{}
		for step := 0; len(data) >= 9; step++ {
			op, raw := data[0], binary.LittleEndian.Uint64(data[1:9])
			data = data[9:]
			k := raw & 0xffff << 9 // collide often, 512-aligned like blocks
			if raw&(1<<63) != 0 {
				k = raw
			}
			check(t, step, &m, ref, op, k, uint32(raw>>32))
		}
		all(t, &m, ref)
	})
}

// TestClear checks that a cleared map is empty, keeps its table, and then
// behaves as a new one.
func TestClear(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var m Map[uint32]
	for round := range 4 {
		ref := map[uint64]uint32{}
		for step := range 5000 * (round + 1) {
			k := uint64(rng.Intn(4000)) << 9
			if rng.Intn(50) == 0 {
				k = 0
			}
			check(t, step, &m, ref, byte(rng.Intn(5)), k, uint32(rng.Intn(1000)))
		}
		all(t, &m, ref)
		n := len(m.slots)
		m.Clear()
		if m.Len() != 0 || len(m.slots) != n {
			t.Fatalf("round %d: after Clear: %d entries, %d slots (had %d)", round, m.Len(), len(m.slots), n)
		}
		all(t, &m, map[uint64]uint32{})
		for i := range m.slots {
			if m.slots[i] != (slot[uint32]{}) {
				t.Fatalf("round %d: slot %d not cleared", round, i)
			}
		}
	}
}

// TestLargeTableSize: a large table holds an entry in at most 8/3 slots
// (it grows at 3/4 full, so it is more than 3/8 full after), where 3/8 as
// the bound gave up to 16/3, and its probes stay short: the mean distance
// of an entry from its home slot, which a lookup walks, and the longest.
// Keys are block addresses, 512 apart, and random ones.
func TestLargeTableSize(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, keys := range []string{"ascending", "random"} {
		for _, n := range []int{100_000, 200_000, 1 << 20} {
			var m Map[int32]
			for i := range n {
				k := uint64(0x7f0000000000 + 512*i)
				if keys == "random" {
					k = rng.Uint64() | 1
				}
				m.Put(k, int32(i))
			}
			if m.Len() != n {
				t.Fatalf("%s %d: Len %d", keys, n, m.Len())
			}
			if per := float64(len(m.slots)) / float64(n); per > 8.0/3 {
				t.Errorf("%s %d: %d slots, %.2f an entry, want at most 8/3", keys, n, len(m.slots), per)
			}
			mask := uint64(len(m.slots) - 1)
			var sum, most uint64
			for i, s := range m.slots {
				if s.key != 0 {
					d := (uint64(i) - m.home(s.key)) & mask
					sum += d
					most = max(most, d)
				}
			}
			if mean := float64(sum) / float64(n); mean > 1.5 || most > 100 {
				t.Errorf("%s %d: probe distance mean %.2f, longest %d; want at most 1.5 and 100", keys, n, mean, most)
			}
		}
	}
}

// TestReserve: a map reserved for n entries takes them without growing
// (its table is the one Reserve made), keeps what it held before, is no
// larger than growing to n would have made it, and still grows past n.
func TestReserve(t *testing.T) {
	for _, n := range []int{0, 1, 24, 25, 1000, 100_000, 1 << 20} {
		var m, grown Map[int]
		for i := range 10 {
			m.Put(uint64(512*(i+1)), i)
		}
		m.Reserve(n)
		var table *slot[int]
		if len(m.slots) > 0 {
			table = &m.slots[0]
		}
		for i := range max(n, 10) {
			k := uint64(512 * (i + 1))
			if i >= 10 {
				m.Put(k, i)
			}
			grown.Put(k, i)
		}
		if len(m.slots) > 0 && &m.slots[0] != table {
			t.Errorf("n %d: the table grew after Reserve", n)
		}
		if len(m.slots) > len(grown.slots) {
			t.Errorf("n %d: %d slots reserved, growing made %d", n, len(m.slots), len(grown.slots))
		}
		for i := range max(n, 10) {
			if v, ok := m.Get(uint64(512 * (i + 1))); !ok || v != i {
				t.Fatalf("n %d: key %d = %d, %v", n, i, v, ok)
			}
		}
		m.Put(uint64(512*(max(n, 10)+1)), -1)
		for range 3 * len(m.slots) / 4 {
			m.Put(uint64(512*(max(n, 10)+2+m.Len())), 0)
		}
		if m.Len() <= max(n, 10) || m.n > m.limit {
			t.Errorf("n %d: %d entries, limit %d after growing past the reservation", n, m.Len(), m.limit)
		}
	}
}

// TestStridedKeys fills maps with arithmetic progressions of addresses (a
// run's blocks or segments, so many bytes apart), strides of 1 to 80,000
// units of 512 bytes, 16,000 to 128,000 keys: on average a key lies at most
// one slot past its home, as random keys do (0.5). With the product's top
// bits alone as the home, some strides clustered: 6.6 slots a key at a
// stride of 709 units and 32,000 keys, 2.8 for segments 1 MiB apart at
// 64,000, growing with the table.
func TestStridedKeys(t *testing.T) {
	worst, at := 0.0, ""
	for m := uint64(1); m <= 80000; m = m*5/4 + 1 {
		for _, n := range []int{16000, 32000, 64000, 128000} {
			var mp Map[int32]
			for k := range n {
				mp.Put(0x7f0000000000+uint64(k)*m*512, int32(k))
			}
			mask := uint64(len(mp.slots) - 1)
			past := 0
			for i, s := range mp.slots {
				if s.key != 0 {
					past += int((uint64(i) - mp.home(s.key)) & mask)
				}
			}
			if d := float64(past) / float64(n); d > worst {
				worst, at = d, fmt.Sprintf("stride %d bytes, %d keys", m*512, n)
			}
		}
	}
	if worst > 1 {
		t.Errorf("%.2f slots past its home a key (%s), want at most 1", worst, at)
	}
	t.Logf("at most %.2f slots past its home a key (%s)", worst, at)
}

// TestResizeFaultsOnce: a large table a map grows into is faulted in for
// writing at once (resizeIn), so that the rehash, which reads each slot
// before it writes one, takes a fault a page, not two (the zero page
// mapped, then copied, with a flush of every core's TLB).
func TestResizeFaultsOnce(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector's shadow memory faults beside the table")
	}
	if !grow.PagesOf(make([]byte, 1<<16)).Populate(0, 1<<16) {
		t.Skip("the system cannot fault pages in at once")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m Map[uint64]
	const slots = 1 << 20 // 16 MiB: fresh memory from the system
	for i := range limitOf(slots / 2) {
		m.Put(uint64(512*(i+1)), uint64(i))
	}
	f0 := cputime.ThreadFaults()
	m.Put(uint64(512*(m.Len()+1)), 0) // grows into slots
	faults := cputime.ThreadFaults() - f0
	if len(m.slots) != slots {
		t.Fatalf("%d slots, want %d", len(m.slots), slots)
	}
	pages := slots * int(unsafe.Sizeof(m.slots[0])) / os.Getpagesize()
	if faults > int64(pages+pages/4) {
		t.Errorf("growing into %d pages took %d faults, want about one a page", pages, faults)
	}
}

// TablesIn: a map grown through several tables made in an OffHeap holds
// every key, and the OffHeap holds its last table alone.
func TestTablesIn(t *testing.T) {
	var h grow.OffHeap
	var m Map[uint64]
	m.TablesIn(&h)
	const n = 100000
	for k := uint64(1); k <= n; k++ {
		m.Put(k*8, k)
	}
	for k := uint64(1); k <= n; k++ {
		if v, ok := m.Get(k * 8); !ok || v != k {
			t.Fatalf("Get(%d) = %d, %v; want %d", k*8, v, ok, k)
		}
	}
	if runtime.GOOS == "linux" {
		table := int64(len(m.slots)) * int64(unsafe.Sizeof(m.slots[0]))
		if got := h.Mapped(); got < table || got > table+4<<20 {
			t.Errorf("%d bytes mapped for a table of %d", got, table)
		}
	}
	h.Release()
}
