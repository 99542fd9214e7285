package grow

import "syscall"

// adviseHuge gives the whole huge pages within [p, p+n) MADV_HUGEPAGE. An
// error (a kernel without transparent huge pages) leaves them as they are.
func adviseHuge(p, n uintptr) {
	beg := alignUp(p)
	end := (p + n) &^ (hugePage - 1)
	if beg < end {
		syscall.Syscall(syscall.SYS_MADVISE, beg, end-beg, syscall.MADV_HUGEPAGE)
	}
}
