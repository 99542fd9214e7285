package grow

import (
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14).
const madvPopulateWrite = 23

// populate faults in the pages of [p, p+n) for writing. The whole pages
// around an array's ends may hold other objects: populating changes none
// of their bytes.
func populate(p, n uintptr) bool {
	_, _, e := syscall.Syscall(syscall.SYS_MADVISE, p, n, madvPopulateWrite)
	return e == 0
}

// resident counts the resident pages of [p, p+n), whole pages.
func resident(p, n, page uintptr) (int, bool) {
	vec := make([]byte, n/page)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, p, n, uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		return 0, false
	}
	k := 0
	for _, v := range vec {
		k += int(v & 1)
	}
	return k, true
}
