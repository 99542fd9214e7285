package torchsnap

import (
	"syscall"
	"unsafe"
)

// adviseHuge asks the kernel to back a large, not yet touched slice with
// transparent huge pages where the system allows it (enabled=madvise): a
// large snapshot's events are hundreds of MB, and faulting them in 4 KiB
// pages costs tens of milliseconds more. Failure changes nothing.
func adviseHuge[T any](s []T) {
	const huge = 2 << 20
	n := uintptr(len(s)) * unsafe.Sizeof(*new(T))
	if n < 4*huge {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), n)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start+huge-1)&^(huge-1) - start // offsets of the whole huge pages in b
	hi := (start+n)&^(huge-1) - start
	if hi <= lo {
		return
	}
	_ = syscall.Madvise(b[lo:hi], 14 /* MADV_HUGEPAGE */)
}
