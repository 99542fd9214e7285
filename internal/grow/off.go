package grow

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"
)

// OffHeap holds arrays made outside the Go heap (MakeOff), each an
// anonymous mapping of its own, until Release. The collector neither
// scans nor counts them: a replay that reserves its arrays for a guess of
// its blocks (tracer replay's, from the trace file's size) would otherwise
// have the runtime count the whole reservation as live heap, touched or
// not, and let garbage pile up to a quarter of it before collecting
// (internal/gcpace's headroom), so that its peak followed the guess
// rather than the blocks it holds. Untouched pages cost no memory, as
// with Make. The zero OffHeap is ready to use; it is safe for concurrent
// use.
type OffHeap struct {
	mu   sync.Mutex
	maps [][]byte
}

// MakeOff returns make([]E, n, c) made in an anonymous mapping of h's,
// which must outlive every use of it; with h nil, Make(n, c). E must hold
// no pointers (the collector does not look into the mapping): MakeOff
// panics otherwise. With UseHugePages, the pages from byte hugeFrom on
// (none if negative) are advised for transparent huge pages as Make's are,
// the array then starting at a huge page's boundary and its last huge
// page whole: a mapping as the kernel places it starts and ends anywhere
// in a huge page, and the parts of one at its ends would stay in 4 KiB
// pages. Where the system maps no memory so, it is Make's.
func MakeOff[E any](h *OffHeap, n, c int, hugeFrom int) []E {
	var e E
	size := uintptr(c) * unsafe.Sizeof(e)
	if h == nil || size == 0 {
		return Make[E](n, c)
	}
	if t := reflect.TypeFor[E](); !pointerFree(t) {
		panic(fmt.Sprintf("grow: MakeOff of %v, which holds pointers", t))
	}
	advise := hugeFrom >= 0 && uintptr(hugeFrom) < size && huge.Load() && size >= HugeMin
	mapped := size
	if advise {
		mapped = alignUp(size) + hugePage
	}
	m, ok := mapAnon(mapped)
	if !ok {
		return Make[E](n, c)
	}
	h.mu.Lock()
	h.maps = append(h.maps, m)
	h.mu.Unlock()
	p := unsafe.Pointer(unsafe.SliceData(m))
	if advise {
		at := uintptr(p)
		p = unsafe.Add(p, alignUp(at)-at)
		adviseHuge(uintptr(p)+uintptr(hugeFrom), alignUp(size)-uintptr(hugeFrom))
	}
	return unsafe.Slice((*E)(p), c)[:n]
}

// MakeOff's hugeFrom: every page advised for huge pages (a table that its
// first blocks fill from the start), none (a hashed table, whose few keys
// touch pages all over it: a page each, not a huge page each), or those
// past the first huge page (an array filled from its start, whose first
// 2 MiB are all that a trace of few blocks live reaches: it then holds
// the 4 KiB pages it touches, not a whole huge page).
const (
	AllHuge       = 0
	NoHuge        = -1
	PastFirstHuge = hugePage
)

// Release unmaps every array MakeOff made in h; none may be used after.
func (h *OffHeap) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.maps {
		unmap(m)
	}
	h.maps = nil
}

// FreeOff unmaps the array of s, which MakeOff made in h (not Make's),
// before Release: s and every slice of its array must not be used after.
// An s made elsewhere is left alone.
func FreeOff[E any](h *OffHeap, s []E) {
	if h == nil || cap(s) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, m := range h.maps {
		if at := uintptr(unsafe.Pointer(unsafe.SliceData(m))); p >= at && p < at+uintptr(len(m)) {
			unmap(m)
			h.maps = append(h.maps[:i], h.maps[i+1:]...)
			return
		}
	}
}

// Mapped is the bytes h has mapped for its arrays (MakeOff's 2 MiB more
// for each it aligns included).
func (h *OffHeap) Mapped() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int64
	for _, m := range h.maps {
		n += int64(len(m))
	}
	return n
}

// pointerFree says whether a value of type t holds no pointers.
func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() == 0 || pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
