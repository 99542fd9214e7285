package grow

import "syscall"

// hugePage is the size of an x86-64 and arm64 transparent huge page.
const hugePage = 2 << 20

// adviseHuge gives the whole huge pages within [p, p+n) MADV_HUGEPAGE. An
// error (a kernel without transparent huge pages) leaves them as they are.
func adviseHuge(p, n uintptr) {
	beg := (p + hugePage - 1) &^ (hugePage - 1)
	end := (p + n) &^ (hugePage - 1)
	if beg < end {
		syscall.Syscall(syscall.SYS_MADVISE, beg, end-beg, syscall.MADV_HUGEPAGE)
	}
}
