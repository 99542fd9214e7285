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
	t := make([]E, len(s), max(64, 2*cap(s), need))
	Huge(t)
	copy(t, s)
	return t
}

// hugeMin is the least array Huge advises: smaller ones hold at most one
// whole huge page, and each advice splits the heap's mapping.
const hugeMin = 4 << 20

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
	if n < hugeMin {
		return
	}
	adviseHuge(uintptr(unsafe.Pointer(unsafe.SliceData(s[:cap(s)]))), n)
}
