package grow

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestHugeAdvised checks that, with UseHugePages, Double's new array of 8 MiB lies in a mapping
// advised for huge pages (smaps' VmFlags "hg").
func TestHugeAdvised(t *testing.T) {
	hugeOn(t)
	big := Double([]uint64(nil), 1<<20) // 8 MiB
	p := uintptr(unsafe.Pointer(unsafe.SliceData(big[:1])))
	mid := (p + 4<<20) &^ (hugePage - 1) // a whole huge page inside it
	if flags := vmFlags(t, mid); !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("Double's 8 MiB array at %#x: VmFlags %q, want hg", mid, flags)
	}
	if p&(hugePage-1) != 0 {
		t.Errorf("Double's 8 MiB array at %#x: not at a huge page's boundary", p)
	}
	// 24-byte elements cannot start at the boundary: the first one
	// starts within 24 bytes past it, and its huge page is advised too.
	odd := Make[[3]uint64](10, 1<<18) // 6 MiB
	q := uintptr(unsafe.Pointer(unsafe.SliceData(odd)))
	if len(odd) != 10 || cap(odd) != 1<<18 || q&(hugePage-1) >= 24 {
		t.Errorf("Make(10, 1<<18) of 24 bytes: len %d cap %d at %#x, want 10, %d and within 24 bytes of a boundary", len(odd), cap(odd), q, 1<<18)
	}
	if flags := vmFlags(t, q); !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("Make's 6 MiB array at %#x: VmFlags %q, want hg", q, flags)
	}
}

// hugeOn skips t where the kernel has no transparent huge pages, and
// turns UseHugePages on until t ends.
func hugeOn(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("no transparent huge pages in this kernel")
	}
	UseHugePages(true)
	t.Cleanup(func() { UseHugePages(false) })
}

// vmFlags returns the VmFlags of the mapping that holds addr.
func vmFlags(t *testing.T, addr uintptr) string {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return ""
}
