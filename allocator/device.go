package allocator

import "errors"

// ErrDeviceOOM is returned (wrapped) by a Device when the driver is out of
// memory. The allocator treats it as PyTorch treats cudaErrorMemoryAllocation:
// it releases cached blocks and retries (spec §4 step 5) before raising an
// OOM. Any other Device error is fatal for the request and is returned as is.
var ErrDeviceOOM = errors.New("device out of memory")

// Device is the memory the caching allocator manages: a real GPU through the
// CUDA driver (package cuda) or a simulated one (SimDevice). Addresses are
// device virtual addresses; sizes are bytes.
//
// The allocator calls Malloc/Free for ordinary segments (cudaMalloc/cudaFree)
// and the Reserve/Map/Unmap/Release quartet for expandable segments (the CUDA
// virtual memory API: cuMemAddressReserve, cuMemCreate+cuMemMap+cuMemSetAccess,
// cuMemUnmap+cuMemRelease, cuMemAddressFree).
type Device interface {
	// Malloc allocates size bytes of device memory (cudaMalloc). On out of
	// memory it returns an error wrapping ErrDeviceOOM.
	Malloc(size int64) (addr uint64, err error)
	// Free releases memory returned by Malloc (cudaFree).
	Free(addr uint64) error

	// Reserve reserves size bytes of virtual address space, mapping nothing.
	Reserve(size int64) (addr uint64, err error)
	// Map backs [addr, addr+size) with physical memory; addr and size are
	// multiples of the page size the allocator chose (2 MiB or 20 MiB, always
	// a multiple of Granularity). On out of memory it wraps ErrDeviceOOM.
	Map(addr uint64, size int64) error
	// Unmap releases the physical memory behind [addr, addr+size).
	Unmap(addr uint64, size int64) error
	// Release returns a reservation made by Reserve; it must be fully unmapped.
	Release(addr uint64, size int64) error

	// MemInfo reports the free and total device memory as the driver sees it
	// (cudaMemGetInfo). The OOM event records free.
	MemInfo() (free, total int64, err error)
	// Granularity is the driver's physical allocation granularity (2 MiB on
	// current NVIDIA GPUs).
	Granularity() int64
}
