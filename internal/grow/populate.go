package grow

import (
	"os"
	"unsafe"
)

// Pages are the memory of an array, for Populate: the array is kept alive
// while they are.
type Pages struct {
	p          unsafe.Pointer
	size, elem uintptr
}

// PagesOf returns the pages of s up to its capacity.
func PagesOf[E any](s []E) Pages {
	var e E
	return Pages{p: unsafe.Pointer(unsafe.SliceData(s)), size: uintptr(cap(s)) * unsafe.Sizeof(e), elem: unsafe.Sizeof(e)}
}

// Len is the number of elements the pages hold.
func (g Pages) Len() int {
	if g.elem == 0 {
		return 0
	}
	return int(g.size / g.elem)
}

// Populate faults in the pages of elements [lo, hi) (clipped to the
// array) without touching a byte of them (Linux's MADV_POPULATE_WRITE),
// so that it may run on another goroutine than the array's users, while
// they use it: a thread that goes on to write them first finds them
// resident instead of taking a page fault for each. It reports false
// where the kernel cannot (before Linux 5.14, other systems): the pages
// then fault in as they are first touched.
func (g Pages) Populate(lo, hi int) bool {
	hi = min(hi, g.Len())
	if lo >= hi || lo < 0 {
		return true
	}
	page := uintptr(os.Getpagesize())
	beg := (uintptr(g.p) + uintptr(lo)*g.elem) &^ (page - 1)
	end := (uintptr(g.p) + uintptr(hi)*g.elem + page - 1) &^ (page - 1)
	return populate(beg, end-beg)
}

// Resident counts the resident pages among those of elements [lo, hi)
// (clipped to the array), for tests of what Populate and the arrays' users
// fault in; false where the system does not say (Linux's mincore).
func (g Pages) Resident(lo, hi int) (int, bool) {
	hi = min(hi, g.Len())
	if lo >= hi || lo < 0 {
		return 0, true
	}
	page := uintptr(os.Getpagesize())
	beg := (uintptr(g.p) + uintptr(lo)*g.elem) &^ (page - 1)
	end := (uintptr(g.p) + uintptr(hi)*g.elem + page - 1) &^ (page - 1)
	return resident(beg, end-beg, page)
}
