package allocator

import (
	"testing"
	"unsafe"
)

// TestReserveRoom: the pages Reserve returns are its room's, in the order
// the arena fills it: populating its first blocks makes those resident
// and no others. The room is usually fresh memory; where the runtime hands
// back pages an earlier test of the package used (resident already), the
// rest of the room is held to what was resident before the populate.
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
	before, _ := room.Resident(touch+1024, n)
	if !room.Populate(0, touch) {
		t.Skip("MADV_POPULATE_WRITE: not on this kernel")
	}
	want := int(uintptr(touch) * unsafe.Sizeof(block{}) >> 12)
	if got, ok := room.Resident(0, touch); !ok {
		t.Skip("mincore failed")
	} else if got < want {
		t.Errorf("the first %d blocks of the room: %d pages resident, want %d", touch, got, want)
	}
	if got, _ := room.Resident(touch+1024, n); got > before+2 {
		t.Errorf("the rest of the room: %d pages resident after the populate, %d before", got, before)
	}
}
