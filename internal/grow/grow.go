// Package grow grows the large, pointer-free arrays of a replay (the
// model's block arena, the summarizer's lists, the numbered live blocks)
// by doubling. append grows a large slice by a quarter at a time, and each
// array it leaves behind stays resident until the runtime gives it back:
// the old arrays of one grown to n entries by quarters add up to about 4n
// entries of memory, by doubling to n; the capacity not yet used is never
// touched, so it costs no resident memory.
package grow

import (
	"sync/atomic"
	"unsafe"
)

// Double returns s copied into a new array (Make) of twice its capacity,
// or of need entries if that is more (64 at the least); its length is
// len(s).
func Double[E any](s []E, need int) []E {
	t := Make[E](len(s), max(64, 2*cap(s), need))
	copy(t, s)
	return t
}

// huge is UseHugePages's switch.
var huge atomic.Bool

// UseHugePages turns Make's huge pages on or off for the process; they are
// off until a command turns them on. A command that makes its large arrays
// once (tracer replay's one pass) gains: their first touch was most of its
// system time. A process that makes them again and again (tracer tune's
// replays) loses: the runtime gives freed memory back to the kernel in
// pieces smaller than a huge page, and each piece splits one.
func UseHugePages(on bool) { huge.Store(on) }

// hugePage is the size of an x86-64 and arm64 transparent huge page.
const hugePage = 2 << 20

// HugeMin is the least array Make puts in huge pages: a smaller one holds
// at most one whole huge page, and each advice splits the heap's mapping.
const HugeMin = 4 << 20

// Make returns make([]E, n, c). With UseHugePages, an array of HugeMin
// bytes or more starts at a huge page's boundary (the runtime aligns large
// arrays to 8 KiB, which leaves up to 2 MiB at each end in small pages)
// and is advised for transparent huge pages (Linux's madvise mode, the
// common default), so that its first touch faults once per 2 MiB instead
// of once per 4 KiB page. The alignment costs up to 2 MiB more address
// space, never touched, so no resident memory.
func Make[E any](n, c int) []E {
	var e E
	size := unsafe.Sizeof(e)
	if size == 0 || uintptr(c)*size < HugeMin || !huge.Load() {
		return make([]E, n, c)
	}
	t := make([]E, c+int(hugePage/size))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(t)))
	b := alignUp(p)
	skip := int((b - p + size - 1) / size) // the first element at or past the boundary
	t = t[skip : skip+n : skip+c]
	adviseHuge(b, p+uintptr(skip+c)*size-b)
	return t
}

func alignUp(p uintptr) uintptr { return (p + hugePage - 1) &^ (hugePage - 1) }
