package grow

import (
	"syscall"
	"testing"
	"unsafe"
)

// Populate makes the pages of the elements asked for resident, and no
// others, and changes no byte.
func TestPopulate(t *testing.T) {
	const pages = 4096 // 16 MiB of fresh memory
	s := make([]uint64, pages*512)
	for i := 0; i < len(s); i += 4099 {
		s[i] = uint64(i) // some pages written before, with values to keep
	}
	before := residentPages(t, s)
	if !PagesOf(s).Populate(0, len(s)/2) {
		t.Skip("MADV_POPULATE_WRITE: not on this kernel")
	}
	want := before/2 + pages/2 // the first half's, and the second's written before
	if got := residentPages(t, s); got < want-2 || got > want+2 {
		t.Errorf("after Populate of half of %d pages: %d resident (%d before), want %d", pages, got, before, want)
	}
	for i := range s {
		want := uint64(0)
		if i%4099 == 0 {
			want = uint64(i)
		}
		if s[i] != want {
			t.Fatalf("s[%d] = %d after Populate, want %d", i, s[i], want)
		}
	}
	if !PagesOf(s).Populate(len(s), len(s)+10) || !PagesOf([]byte{}).Populate(0, 1) {
		t.Error("Populate of nothing failed")
	}
}

// residentPages counts the pages of s that are resident (mincore).
func residentPages(t *testing.T, s []uint64) int {
	t.Helper()
	const page = 4096
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo, hi := p&^(page-1), (p+uintptr(len(s))*8+page-1)&^(page-1)
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
