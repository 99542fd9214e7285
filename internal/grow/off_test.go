package grow

import (
	"runtime"
	"testing"
)

// MakeOff's array is zero, holds what is written to it, and lies outside
// the Go heap: the heap does not grow by its size, however much of it is
// touched. Release gives it back.
func TestMakeOff(t *testing.T) {
	const n = 8 << 20 // 64 MiB of uint64
	var h OffHeap
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := MakeOff[uint64](&h, 10, n, PastFirstHuge)
	if len(s) != 10 || cap(s) != n {
		t.Fatalf("MakeOff(10, %d): len %d cap %d", n, len(s), cap(s))
	}
	s = s[:n]
	for i := 0; i < n; i += 4096 {
		if s[i] != 0 {
			t.Fatalf("s[%d] = %d, want 0", i, s[i])
		}
		s[i] = uint64(i)
	}
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapSys) - int64(before.HeapSys); grew >= n*8/2 {
		t.Errorf("the heap grew by %d MiB for a 64 MiB array made outside it", grew>>20)
	}
	if runtime.GOOS == "linux" && h.Mapped() < n*8 {
		t.Errorf("%d bytes mapped, want at least %d", h.Mapped(), n*8)
	}
	for i := 0; i < n; i += 4096 {
		if s[i] != uint64(i) {
			t.Fatalf("s[%d] = %d, want %d", i, s[i], i)
		}
	}
	h.Release()
	if h.Mapped() != 0 {
		t.Errorf("%d bytes mapped after Release", h.Mapped())
	}
	if d := MakeOff[uint64](nil, 3, 100, AllHuge); len(d) != 3 || cap(d) != 100 {
		t.Errorf("MakeOff(nil, 3, 100): len %d cap %d", len(d), cap(d))
	}
}

// MakeOff refuses a type that holds pointers, which the collector would
// not see there.
func TestMakeOffPointers(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MakeOff of a struct with a pointer did not panic")
		}
	}()
	var h OffHeap
	defer h.Release()
	MakeOff[struct {
		n int
		p *int
	}](&h, 0, 1000, NoHuge)
}

// FreeOff unmaps the one array it is given, before Release, and leaves an
// array made elsewhere alone.
func TestFreeOff(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("MakeOff maps nothing here")
	}
	var h OffHeap
	a := MakeOff[uint32](&h, 1000, 1000, NoHuge)
	b := MakeOff[uint32](&h, 5000, 5000, NoHuge)
	b[4999] = 7
	both := h.Mapped()
	FreeOff(&h, a[10:])
	if got := h.Mapped(); got != both-4000 {
		t.Errorf("%d bytes mapped after freeing a 4000-byte array, want %d", got, both-4000)
	}
	FreeOff(&h, make([]uint32, 10))
	FreeOff[uint32](&h, nil)
	if got := h.Mapped(); got != both-4000 || b[4999] != 7 {
		t.Errorf("%d bytes mapped (want %d), b[4999] = %d (want 7), after freeing arrays not made there", got, both-4000, b[4999])
	}
	h.Release()
}
