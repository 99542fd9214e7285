//go:build cgo

package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
)

// Tests on a real GPU: they run only with TRACER_GPU=1 (testdata/gpu-run.sh).

const mib = 1 << 20

func openGPU(tb testing.TB) *Device {
	tb.Helper()
	if !gpuTests() {
		tb.Skip("needs a GPU; set TRACER_GPU=1")
	}
	d, err := Open(0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return d
}

func TestGPU_open(t *testing.T) {
	d := openGPU(t)
	t.Logf("GPU %d: %s, %d MiB, CUDA driver %d, granularity %d", d.Ordinal(), d.Name(), d.TotalBytes()/mib, d.DriverVersion(), d.Granularity())
	if d.Granularity() != 2*mib {
		t.Errorf("granularity = %d, want 2 MiB", d.Granularity())
	}
	free, total, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MemInfo: free %d MiB of %d MiB", free/mib, total/mib)
	if total != d.TotalBytes() || free <= 0 || free > total {
		t.Errorf("MemInfo = free %d total %d; TotalBytes %d", free, total, d.TotalBytes())
	}
	if _, err := Open(1 << 20); err == nil || !strings.Contains(err.Error(), "no GPU") {
		t.Errorf("Open(1<<20) error = %v", err)
	}
}

func TestGPU_mallocFree(t *testing.T) {
	d := openGPU(t)
	d.SetTiming(true)
	free0, _, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []uint64
	for _, size := range []int64{2 * mib, 20 * mib} {
		a, err := d.Malloc(size)
		if err != nil {
			t.Fatalf("Malloc(%d): %v", size, err)
		}
		if a == 0 || a%512 != 0 {
			t.Errorf("Malloc(%d) = %#x", size, a)
		}
		if err := d.memsetD8(a, 0xab, size); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a)
	}
	free1, _, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free0-free1 < 22*mib {
		t.Errorf("free memory fell by %d bytes after 22 MiB of Malloc", free0-free1)
	}
	if err := d.Synchronize(); err != nil { // the memsets are done
		t.Fatal(err)
	}
	for _, a := range addrs {
		if err := d.Free(a); err != nil {
			t.Fatal(err)
		}
	}
	tm := d.Timings()
	if tm.Malloc.Count != 2 || tm.Free.Count != 2 || tm.Malloc.Total <= 0 {
		t.Errorf("timings = %+v", tm)
	}
	t.Logf("Malloc mean %v max %v; Free mean %v max %v", tm.Malloc.Mean(), tm.Malloc.Max, tm.Free.Mean(), tm.Free.Max)
}

func TestGPU_oom(t *testing.T) {
	d := openGPU(t)
	size := d.TotalBytes() + 1<<30
	a, err := d.Malloc(size)
	if err == nil {
		d.Free(a)
		t.Fatalf("Malloc(%d) succeeded", size)
	}
	if !errors.Is(err, allocator.ErrDeviceOOM) {
		t.Errorf("Malloc(total+1GiB) error %q does not wrap ErrDeviceOOM", err)
	}
	want := "cuda: cuMemAlloc(" + bytesArg(size) + "): CUDA_ERROR_OUT_OF_MEMORY"
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	// The device still works after an OOM.
	a, err = d.Malloc(2 * mib)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Free(a); err != nil {
		t.Fatal(err)
	}
}

func TestGPU_expandable(t *testing.T) {
	d := openGPU(t)
	d.SetTiming(true)
	const page = 20 * mib
	const reserve = 10 * page
	base, err := d.Reserve(reserve)
	if err != nil {
		t.Fatal(err)
	}
	if base%uint64(d.Granularity()) != 0 {
		t.Errorf("Reserve = %#x, not aligned to %d", base, d.Granularity())
	}
	free0, _, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	// Map two pages in one call, then a third in another.
	if err := d.Map(base, 2*page); err != nil {
		t.Fatal(err)
	}
	if err := d.Map(base+2*page, page); err != nil {
		t.Fatal(err)
	}
	if got := d.Mapped(); got != 3*page {
		t.Errorf("Mapped = %d, want %d", got, 3*page)
	}
	free1, _, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free0-free1 < 3*page {
		t.Errorf("free memory fell by %d bytes after mapping %d", free0-free1, 3*page)
	}
	// Write across the page boundaries and read it back: the mapping is
	// contiguous and writable.
	if err := d.memsetD8(base, 0x5a, 3*page); err != nil {
		t.Fatal(err)
	}
	if err := d.memsetD8(base+page-mib, 0xc3, 2*mib); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4*mib)
	if err := d.memcpyDtoH(buf, base+page-2*mib); err != nil {
		t.Fatal(err)
	}
	for i, b := range buf {
		want := byte(0x5a)
		if i >= mib && i < 3*mib {
			want = 0xc3
		}
		if b != want {
			t.Fatalf("byte %d around the page boundary = %#x, want %#x", i, b, want)
		}
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	// Mapping a mapped granule again fails without touching the driver.
	if err := d.Map(base+page, page); err == nil || !strings.Contains(err.Error(), "already mapped") {
		t.Errorf("Map over a mapped page: %v", err)
	}
	// Unmap the middle page (a sub-range of the first Map), then the rest.
	if err := d.Unmap(base+page, page); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmap(base+page, page); err == nil || !strings.Contains(err.Error(), "not mapped") {
		t.Errorf("second Unmap of a page: %v", err)
	}
	if err := d.memcpyDtoH(buf[:mib], base); err != nil || buf[0] != 0x5a {
		t.Errorf("first page after unmapping the second: %v, byte %#x", err, buf[0])
	}
	if err := d.Unmap(base, page); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmap(base+2*page, page); err != nil {
		t.Fatal(err)
	}
	if got := d.Mapped(); got != 0 {
		t.Errorf("Mapped = %d after unmapping all", got)
	}
	// A small-pool page: one granule.
	if err := d.Map(base+9*page, 2*mib); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmap(base+9*page, 2*mib); err != nil {
		t.Fatal(err)
	}
	if err := d.Map(base+mib, 2*mib); err == nil {
		t.Error("Map of an unaligned address succeeded")
	}
	if err := d.Release(base, reserve); err != nil {
		t.Fatal(err)
	}
	tm := d.Timings()
	t.Logf("Reserve %v, Map mean %v (n=%d), Unmap mean %v (n=%d), Release %v",
		tm.Reserve.Mean(), tm.Map.Mean(), tm.Map.Count, tm.Unmap.Mean(), tm.Unmap.Count, tm.Release.Mean())
	if tm.Reserve.Count != 1 || tm.Release.Count != 1 || tm.Map.Count != 3 || tm.Unmap.Count != 4 {
		t.Errorf("timing counts = %+v", tm)
	}
}

// TestGPU_reservePaged maps 20 MiB pages with one handle each, as PyTorch's
// large pool does.
func TestGPU_reservePaged(t *testing.T) {
	d := openGPU(t)
	const page = 20 * mib
	base, err := d.ReservePaged(8*page-mib, page) // rounded up to 8 pages
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Map(base, 3*page); err != nil {
		t.Fatal(err)
	}
	if err := d.memsetD8(base, 0x11, 3*page); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2*mib)
	if err := d.memcpyDtoH(buf, base+3*page-2*mib); err != nil || buf[0] != 0x11 || buf[len(buf)-1] != 0x11 {
		t.Fatalf("read back: %v", err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmap(base+page, 2*mib); err == nil {
		t.Error("Unmap of part of a 20 MiB page succeeded")
	}
	if err := d.Map(base+7*page, 2*page); err == nil || !strings.Contains(err.Error(), "past its reservation") {
		t.Errorf("Map past the reservation: %v", err)
	}
	if err := d.Release(base, 8*page); err == nil || !strings.Contains(err.Error(), "still mapped") {
		t.Errorf("Release while mapped: %v", err)
	}
	if err := d.Unmap(base+page, page); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmap(base, page); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmap(base+2*page, page); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(base, 8*page); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReservePaged(page, 3*mib); err == nil {
		t.Error("ReservePaged with a 3 MiB page succeeded")
	}
}

func TestGPU_mapOOM(t *testing.T) {
	d := openGPU(t)
	_, total, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	size := roundUp(total+1<<30, d.Granularity())
	base, err := d.Reserve(size)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Map(base, size)
	if !errors.Is(err, allocator.ErrDeviceOOM) {
		t.Errorf("Map(total+1GiB) error = %v, want ErrDeviceOOM", err)
	}
	t.Logf("Map(total+1GiB): %v", err)
	if got := d.Mapped(); got != 0 {
		t.Errorf("Mapped = %d after a failed Map", got)
	}
	// The failed Map gave everything back.
	if err := d.Map(base, 20*mib); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmap(base, 20*mib); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(base, size); err != nil {
		t.Fatal(err)
	}
}

func TestGPU_query(t *testing.T) {
	if !gpuTests() {
		t.Skip("needs a GPU; set TRACER_GPU=1")
	}
	info, err := Query(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *info)
	if !strings.Contains(info.Name, "H100") && !strings.Contains(info.Name, "H200") {
		t.Errorf("GPU 0 is %q, want an H100 or H200", info.Name)
	}
	if info.TotalBytes <= 0 || info.UsedBytes < 0 || info.CUDADriverVersion < 12000 || !strings.HasPrefix(info.UUID, "GPU-") {
		t.Errorf("info = %+v", *info)
	}
}

func BenchmarkMallocFree(b *testing.B) {
	d := openGPU(b)
	const size = 2 * mib
	for b.Loop() {
		a, err := d.Malloc(size)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Free(a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMapUnmap maps and unmaps one page of a reservation, the
// expandable-segment counterpart of BenchmarkMallocFree: a 2 MiB page (the
// small pool), and a 20 MiB page (the large pool) made of ten 2 MiB handles
// (Reserve) or of one handle as PyTorch does (ReservePaged).
func BenchmarkMapUnmap(b *testing.B) {
	for _, bc := range []struct {
		name         string
		page, handle int64
	}{
		{"page=2MiB", 2 * mib, 2 * mib},
		{"page=20MiB/handle=2MiB", 20 * mib, 2 * mib},
		{"page=20MiB/handle=20MiB", 20 * mib, 20 * mib},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := openGPU(b)
			base, err := d.ReservePaged(bc.page, bc.handle)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := d.Map(base, bc.page); err != nil {
					b.Fatal(err)
				}
				if err := d.Unmap(base, bc.page); err != nil {
					b.Fatal(err)
				}
			}
			if err := d.Release(base, bc.page); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkMemInfo measures one cgo crossing plus cuCtxSetCurrent and
// cuMemGetInfo: the per-call floor of this package.
func BenchmarkMemInfo(b *testing.B) {
	d := openGPU(b)
	for b.Loop() {
		if _, _, err := d.MemInfo(); err != nil {
			b.Fatal(err)
		}
	}
}
