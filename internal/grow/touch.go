package grow

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// touchPart is the least memory Touch gives a goroutine of its own.
const touchPart = 4 << 20

// Touch faults in the pages of s (its elements up to len) on the calling
// goroutine and, for a large s, on others beside it (up to GOMAXPROCS in
// all), and returns when every page is resident: so that a thread that
// goes on to use s, and would otherwise take a page fault each time it
// first reaches a page, takes none. It writes each page once, leaving
// every byte as it was (an atomic add of 0 to its first word), so s may
// hold anything, but no other goroutine may use s meanwhile.
func Touch[E any](s []E) {
	var e E
	size := uintptr(len(s)) * unsafe.Sizeof(e)
	if size == 0 {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(s))
	page := uintptr(os.Getpagesize())
	parts := int(min(uintptr(runtime.GOMAXPROCS(0)), max(1, size/touchPart)))
	// Part p touches the pages that begin in its bytes [lo, hi) of s, and
	// part 0 the first whole word of s as well (its page may begin before
	// s). Offsets, not addresses: a page begins at an offset off with
	// base+off a multiple of page.
	part := (size/uintptr(parts) + page - 1) &^ (page - 1)
	skew := uintptr(base) & (page - 1) // base's offset within its page
	var wg sync.WaitGroup
	touch := func(p int) {
		lo, hi := uintptr(p)*part, min(uintptr(p+1)*part, size)
		if p == 0 {
			if first := (uintptr(base)+3)&^3 - uintptr(base); first+4 <= size {
				touchWord(unsafe.Add(base, first))
			}
		}
		for off := (lo+skew+page-1)&^(page-1) - skew; off < hi; off += page {
			touchWord(unsafe.Add(base, off))
		}
	}
	for p := 1; p < parts; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			touch(p)
		}()
	}
	touch(0)
	wg.Wait()
	runtime.KeepAlive(s)
}

// touchWord writes the 4-byte word at p (4-aligned: a page's start, or
// the first in an array) with its own value.
func touchWord(p unsafe.Pointer) {
	atomic.AddUint32((*uint32)(p), 0)
}
