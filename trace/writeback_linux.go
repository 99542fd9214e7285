package trace

import (
	"os"
	"syscall"
)

// startWriteback asks the kernel to start writing n bytes of f at off to
// the disk, without waiting (sync_file_range with SYNC_FILE_RANGE_WRITE). A
// live recording calls it after each write, so that the fsyncs, and above
// all the one in Close at the end of a recording, find those pages already
// on their way and wait for less. It is advice: an error is ignored (the
// fsyncs report the ones that matter).
func startWriteback(f *os.File, off, n int64) {
	const syncFileRangeWrite = 2 // SYNC_FILE_RANGE_WRITE
	syscall.Syscall6(syscall.SYS_SYNC_FILE_RANGE, f.Fd(), uintptr(off), uintptr(n), syncFileRangeWrite, 0, 0)
}
