package allocator

import (
	"syscall"
	"testing"
	"unsafe"
)

// TestReserveRoom: the pages Reserve returns are its room's, in the order
// the arena fills it: populating its first blocks makes those resident
// and no others.
func TestReserveRoom(t *testing.T) {
	// 128 MB of room, more than the package's tests free: fresh memory,
	// which the runtime does not clear (it would touch every page).
	const n, touch = 2_000_000, 100_000
	a, err := New(DefaultConf(), NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	room := a.Reserve(n)
	if room.Len() != n {
		t.Fatalf("Reserve(%d): room for %d blocks", n, room.Len())
	}
	if !room.Populate(0, touch) {
		t.Skip("MADV_POPULATE_WRITE: not on this kernel")
	}
	blocks := a.blocks[len(a.blocks):cap(a.blocks)]
	size := unsafe.Sizeof(block{})
	want := int(uintptr(touch) * size >> 12)
	if got := resident(t, unsafe.Pointer(unsafe.SliceData(blocks[:touch])), uintptr(touch)*size); got < want {
		t.Errorf("the first %d blocks of the room: %d pages resident, want %d", touch, got, want)
	}
	if got := resident(t, unsafe.Pointer(unsafe.SliceData(blocks[touch+1024:])), uintptr(len(blocks)-touch-1024)*size); got > 2 {
		t.Errorf("the rest of the room: %d pages resident, want none", got)
	}
}

// resident counts the resident pages of the size bytes at p (mincore).
func resident(t *testing.T, p unsafe.Pointer, size uintptr) int {
	t.Helper()
	const page = 4096
	lo, hi := uintptr(p)&^(page-1), (uintptr(p)+size+page-1)&^(page-1)
	vec := make([]byte, (hi-lo)/page)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, lo, hi-lo, uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		t.Skipf("mincore: %v", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
