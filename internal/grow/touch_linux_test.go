package grow

import (
	"syscall"
	"testing"
	"unsafe"
)

// Touch makes every page of a fresh array resident, in parts, and changes
// no byte.
func TestTouch(t *testing.T) {
	const pages = 4096 // 16 MiB: several parts
	s := make([]uint64, pages*512)
	for i := 0; i < len(s); i += 4099 {
		s[i] = uint64(i) // some pages written before, with values to keep
	}
	before := residentPages(t, s)
	Touch(s)
	if after := residentPages(t, s); after < pages {
		t.Errorf("after Touch %d of %d pages resident (%d before)", after, pages, before)
	}
	for i := range s {
		want := uint64(0)
		if i%4099 == 0 {
			want = uint64(i)
		}
		if s[i] != want {
			t.Fatalf("s[%d] = %d after Touch, want %d", i, s[i], want)
		}
	}
	Touch([]byte{}) // nothing to touch
	b := make([]byte, 3)
	Touch(b[1:]) // no whole word: nothing written
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
