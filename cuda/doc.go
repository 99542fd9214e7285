// Package cuda drives a real NVIDIA GPU for tracer: a Device that gives the
// caching-allocator model (package allocator) real device memory through
// the CUDA driver API, and NVML queries (Query, MemorySampler) that record
// what the GPU reports.
//
// # Loading the driver at run time
//
// The CUDA driver API is reached with dlopen("libcuda.so.1") and dlsym, the
// way go-nvml loads libnvidia-ml.so.1. The few CUDA types used are declared
// in driver.h with the layouts of cuda.h (CUDA 12 and 13; static assertions
// pin the struct sizes) and called from the C shims of driver.c, so
// building needs neither CUDA headers nor libraries, and one binary runs
// everywhere: where there is no driver, Open fails with an error wrapping
// ErrNoDriver,
//
//	cuda: no CUDA driver found (libcuda.so.1: libcuda.so.1: cannot open shared object file: No such file or directory)
//
// and callers fall back to allocator.SimDevice. Built with CGO_ENABLED=0 the
// package still compiles; every entry point then fails the same way.
// Entry points are resolved by the names cuda.h maps to (cuMemAlloc_v2,
// cuMemFree_v2, cuMemGetInfo_v2, cuDeviceTotalMem_v2,
// cuDevicePrimaryCtxRelease_v2), with the legacy default stream.
//
// # Threads
//
// A CUDA context is current per OS thread, and goroutines move between
// threads. Rather than asking callers to lock OS threads, every Device
// operation is one cgo call into a C shim (driver.c) that makes the device's
// primary context current (cuCtxSetCurrent, a thread-local store) and then
// makes the driver call(s). So a Device may be used from any goroutine, and
// concurrently (a mutex serializes calls). One cgo crossing per operation
// keeps the overhead next to the driver's own cost.
//
// # Expandable segments: one handle per page
//
// Map backs a range with one cuMemCreate handle per page, maps each with
// cuMemMap, and then grants read/write access to the whole range with one
// cuMemSetAccess, as PyTorch's ExpandableSegment does. A page is the
// granule (the minimum allocation granularity, 2 MiB on current GPUs) for a
// range from Reserve, and the page size given to ReservePaged for a range
// from it. The Device keeps a map from page address to handle, so Unmap can
// release any page-aligned sub-range of what one or more Map calls mapped:
// it calls cuMemUnmap and cuMemRelease per page.
//
// allocator.Device.Reserve does not say which page size the allocator will
// map with (2 MiB in the small pool, 20 MiB in the large), so Reserve uses
// granules, which is always correct: a 20 MiB page then costs ten driver
// allocations where PyTorch makes one (on an H100, Map+Unmap of a 20 MiB
// page takes about 0.7 ms with ten handles and 0.1 ms with one). An
// allocator that knows its page size calls ReservePaged instead, through an
// interface check:
//
//	type pagedReserver interface {
//		ReservePaged(size, pageSize int64) (uint64, error)
//	}
//
// Handles are created without a shareable handle type
// (CU_MEM_HANDLE_TYPE_NONE). A failed Map leaves nothing mapped. Unmap does
// not synchronize.
//
// # Errors
//
// A failed driver call becomes an *Error naming the call, its arguments and
// the CUDA error name (from cuGetErrorName):
//
//	cuda: cuMemAlloc(2097152 bytes): CUDA_ERROR_OUT_OF_MEMORY
//	cuda: Map(0x7f2a00000000, 41943040 bytes): cuMemCreate(2097152 bytes): CUDA_ERROR_OUT_OF_MEMORY
//
// CUDA_ERROR_OUT_OF_MEMORY wraps allocator.ErrDeviceOOM, so the allocator
// frees its cache and retries, as PyTorch does. NVML failures name the NVML
// call and wrap the nvml.Return. A missing NVML library wraps ErrNoDriver;
// a go-nvml panic becomes an error.
//
// # Timing
//
// Device.SetTiming(true) makes the Device accumulate the count, total and
// maximum wall time of each kind of call (Malloc, Free, Reserve, Map, Unmap,
// Release), measured on the monotonic clock around the one cgo call, so
// `tracer replay --device cuda` can print device latencies next to the
// allocator's statistics.
//
// # Tests
//
// Tests that need no GPU run everywhere. Tests on a real GPU run only with
// TRACER_GPU=1 (see testdata/gpu-run.sh):
//
//	CGO_ENABLED=1 go test -c -o .dev/cuda.test ./cuda
//	cuda/testdata/gpu-run.sh .dev/cuda.test   # on the GPU machine
package cuda
