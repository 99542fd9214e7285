package grow

import "syscall"

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14).
const madvPopulateWrite = 23

// populate faults in the pages of [p, p+n) for writing. The whole pages
// around an array's ends may hold other objects: populating changes none
// of their bytes.
func populate(p, n uintptr) bool {
	_, _, e := syscall.Syscall(syscall.SYS_MADVISE, p, n, madvPopulateWrite)
	return e == 0
}
