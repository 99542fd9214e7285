package allocator

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestReserve: an arena reserved for n blocks holds n blocks in the array
// Reserve made, with the blocks made before it kept, and a run through it
// ends in the state, statistics and segments of one that was not reserved.
func TestReserve(t *testing.T) {
	const n = 50_000
	run := func(reserve bool) (*Allocator, unsafe.Pointer) {
		a, err := New(DefaultConf(), NewSimDevice(1<<40))
		if err != nil {
			t.Fatal(err)
		}
		var addrs []uint64
		var hs []Handle
		malloc := func(size int64) {
			addr, h, err := a.MallocHandle(size, 0)
			if err != nil {
				t.Fatal(err)
			}
			addrs, hs = append(addrs, addr), append(hs, h)
		}
		for i := range 100 { // blocks made before Reserve, which it keeps
			malloc(int64(512 * (1 + i%5)))
		}
		var arena unsafe.Pointer
		if reserve {
			a.Reserve(n)
			arena = unsafe.Pointer(unsafe.SliceData(a.blocks))
			a.Reserve(n / 2) // never shrinks
		}
		for i := range n - 200 {
			malloc(int64(512 * (1 + i%5)))
		}
		for i := 0; i < len(hs); i += 2 {
			if err := a.FreeHandle(addrs[i], hs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		return a, arena
	}
	plain, _ := run(false)
	a, arena := run(true)
	if got := unsafe.Pointer(unsafe.SliceData(a.blocks)); got != arena {
		t.Errorf("the arena reserved for %d blocks was made again at %d blocks (capacity %d)", n, len(a.blocks), cap(a.blocks))
	}
	if cap(a.blocks) != n+1 {
		t.Errorf("arena capacity %d after Reserve(%d), want %d", cap(a.blocks), n, n+1)
	}
	if !reflect.DeepEqual(a.Stats(), plain.Stats()) || !reflect.DeepEqual(a.Segments(), plain.Segments()) {
		t.Error("a reserved arena's run ends in other statistics or segments than a plain one's")
	}
}
