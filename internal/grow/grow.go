// Package grow grows the large, pointer-free arrays of a replay (the
// model's block arena, the summarizer's lists, the numbered live blocks)
// by doubling. append grows a large slice by a quarter at a time, and each
// array it leaves behind stays resident until the runtime gives it back:
// the old arrays of one grown to n entries by quarters add up to about 4n
// entries of memory, by doubling to n; the capacity not yet used is never
// touched, so it costs no resident memory.
package grow

import "unsafe"

// Double returns s copied into a new array of twice its capacity, or of
// need entries if that is more (64 at the least); its length is len(s).
// The new array is advised for huge pages (Huge) before the copy touches it.
func Double[E any](s []E, need int) []E {
	t := Make[E](len(s), max(64, 2*cap(s), need))
	copy(t, s)
	return t
}

// Make returns make([]E, n, c); an array of 4 MiB or more starts at a huge
// page's boundary (the runtime aligns large arrays to 8 KiB only, which
// leaves up to 2 MiB at each end in small pages) and is advised for huge
// pages (Huge). It allocates up to 2 MiB more address space for that,
// which is never touched, so it costs no resident memory.
func Make[E any](n, c int) []E {
	var e E
	size := unsafe.Sizeof(e)
	if size == 0 || uintptr(c)*size < HugeMin {
		return make([]E, n, c)
	}
	pad := int(hugePage / size)
	t := make([]E, c+pad)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(t)))
	b := alignUp(p)
	skip := int((b - p + size - 1) / size) // the first element at or past the boundary
	t = t[skip : skip+n : skip+c]
	adviseHuge(b, p+uintptr(skip+c)*size-b)
	return t
}

func alignUp(p uintptr) uintptr { return (p + hugePage - 1) &^ (hugePage - 1) }

// hugePage is the size of an x86-64 and arm64 transparent huge page.
const hugePage = 2 << 20

// HugeMin is the least array Huge advises and Make aligns: smaller ones hold at most one
// whole huge page, and each advice splits the heap's mapping.
const HugeMin = 4 << 20

// Huge advises the kernel to back s's array (its capacity) with
// transparent huge pages where they are enabled for advised memory (Linux's
// madvise mode, the common default): its first touch then faults once per
// 2 MiB instead of once per 4 KiB page. A replay's large arrays are fresh
// memory touched once in order, and their page faults were about a third
// of a replay's CPU. Arrays under 4 MiB are left alone; it changes nothing
// but the faults (and nothing on other systems).
func Huge[E any](s []E) {
	var e E
	n := uintptr(cap(s)) * unsafe.Sizeof(e)
	if n < HugeMin {
		return
	}
	adviseHuge(uintptr(unsafe.Pointer(unsafe.SliceData(s[:cap(s)]))), n)
}
