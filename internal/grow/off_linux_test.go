package grow

import (
	"strings"
	"testing"
	"unsafe"
)

// TestMakeOffHugeWhole: with UseHugePages, MakeOff's array of a size that
// is no whole number of huge pages starts at a huge page's boundary, and
// its first and last elements lie in pages advised for huge pages, so
// that no part of it at either end is faulted in 4 KiB at a time (the
// mapping as the kernel placed it left up to 2 MiB at each end so).
func TestMakeOffHugeWhole(t *testing.T) {
	hugeOn(t)
	var h OffHeap
	defer h.Release()
	for _, c := range []int{5<<20/40 + 3, 9<<20/40 + 1, 4 << 20 / 40 * 3} {
		s := MakeOff[[5]uint64](&h, c, c, AllHuge)
		first := uintptr(unsafe.Pointer(&s[0]))
		last := uintptr(unsafe.Pointer(&s[c-1]))
		if first&(hugePage-1) != 0 {
			t.Errorf("MakeOff of %d elements of 40 bytes at %#x: not at a huge page's boundary", c, first)
		}
		for _, at := range []uintptr{first, last} {
			if flags := vmFlags(t, at); !strings.Contains(" "+flags+" ", " hg ") {
				t.Errorf("MakeOff of %d elements of 40 bytes: %#x (array %#x-%#x) has VmFlags %q, want hg", c, at, first, last+40, flags)
			}
		}
		s[0][0], s[c-1][4] = 1, 2
		if s[0][0] != 1 || s[c-1][4] != 2 || s[c/2][2] != 0 {
			t.Errorf("MakeOff of %d elements: wrote 1 and 2 at its ends, read %d, %d, and %d between", c, s[0][0], s[c-1][4], s[c/2][2])
		}
	}
	// Below HugeMin, or with no huge pages from its start, the array is
	// the mapping's own.
	small := MakeOff[uint64](&h, 1, 1<<16, AllHuge)
	if cap(small) != 1<<16 || len(small) != 1 {
		t.Errorf("MakeOff(1, 1<<16): len %d cap %d", len(small), cap(small))
	}
}
