package torchsnap

import (
	"syscall"
	"unsafe"
)

// mapEvents returns room for n events in anonymous memory of their own,
// outside the Go heap, and the mapping to give back with unmapEvents; nil
// if the system refuses (the caller then allocates on the heap). Pages
// never touched cost no memory, and the collector neither scans nor counts
// them: a store's base, sized for the most entries a file could hold,
// would otherwise set the heap's goal as if all of it were in use (see
// ReadFileMapped).
func mapEvents(n int64) ([]cev, []byte) {
	evs, m := mapAnon[cev](n)
	if len(m) >= hugeMapMin {
		adviseHuge(evs)
	}
	return evs, m
}

// mapAnon returns room for n values of T in a private anonymous mapping,
// and the mapping; nil where n is not positive, its size overflows, or the
// system refuses.
func mapAnon[T any](n int64) ([]T, []byte) {
	var zero T
	elem := int64(unsafe.Sizeof(zero))
	size := n * elem
	if n <= 0 || size/n != elem || int64(int(size)) != size {
		return nil, nil
	}
	m, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(m))), n), m
}

func unmapEvents(m []byte) { syscall.Munmap(m) }

// discardEvents gives the pages of b, part of a mapping from mapEvents,
// back to the system; they read as zero after.
func discardEvents(b []byte) { syscall.Madvise(b, 4 /* MADV_DONTNEED */) }

// mapRecs returns room for n records in anonymous memory of its own, as
// mapEvents does for events, or nil; unmapRecs gives it back.
func mapRecs(n int) []srec {
	recs, _ := mapAnon[srec](int64(n))
	return recs
}

func unmapRecs(r []srec) {
	if cap(r) > 0 {
		syscall.Munmap(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(r))), cap(r)*int(recSize)))
	}
}
