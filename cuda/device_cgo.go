//go:build cgo

package cuda

/*
#cgo linux LDFLAGS: -ldl
#cgo noescape tr_load
#cgo nocallback tr_load
#cgo noescape tr_error_name
#cgo nocallback tr_error_name
#cgo noescape tr_device_open
#cgo nocallback tr_device_open
#cgo nocallback tr_ctx_release
#cgo noescape tr_malloc
#cgo nocallback tr_malloc
#cgo nocallback tr_free
#cgo noescape tr_reserve
#cgo nocallback tr_reserve
#cgo nocallback tr_address_free
#cgo noescape tr_map
#cgo nocallback tr_map
#cgo noescape tr_unmap
#cgo nocallback tr_unmap
#cgo noescape tr_mem_info
#cgo nocallback tr_mem_info
#cgo nocallback tr_synchronize
#cgo nocallback tr_memset_d8
#cgo noescape tr_memcpy_dtoh
#cgo nocallback tr_memcpy_dtoh

#include <stdlib.h>

#include "driver.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/tracer-dev/tracer/allocator"
)

// libcuda is the driver library Open loads.
const libcuda = "libcuda.so.1"

// callNames maps TR_CALL_* to the driver entry point, as Error.Call shows it.
var callNames = [...]string{
	C.TR_CALL_NONE:                           "cuda call",
	C.TR_CALL_CTX_SET_CURRENT:                "cuCtxSetCurrent",
	C.TR_CALL_MEM_ALLOC:                      "cuMemAlloc",
	C.TR_CALL_MEM_FREE:                       "cuMemFree",
	C.TR_CALL_MEM_ADDRESS_RESERVE:            "cuMemAddressReserve",
	C.TR_CALL_MEM_ADDRESS_FREE:               "cuMemAddressFree",
	C.TR_CALL_MEM_CREATE:                     "cuMemCreate",
	C.TR_CALL_MEM_MAP:                        "cuMemMap",
	C.TR_CALL_MEM_SET_ACCESS:                 "cuMemSetAccess",
	C.TR_CALL_MEM_UNMAP:                      "cuMemUnmap",
	C.TR_CALL_MEM_RELEASE:                    "cuMemRelease",
	C.TR_CALL_MEM_GET_INFO:                   "cuMemGetInfo",
	C.TR_CALL_MEM_GET_ALLOCATION_GRANULARITY: "cuMemGetAllocationGranularity",
	C.TR_CALL_CTX_SYNCHRONIZE:                "cuCtxSynchronize",
	C.TR_CALL_MEMSET_D8:                      "cuMemsetD8",
	C.TR_CALL_MEMCPY_DTOH:                    "cuMemcpyDtoH",
	C.TR_CALL_INIT:                           "cuInit",
	C.TR_CALL_DRIVER_GET_VERSION:             "cuDriverGetVersion",
	C.TR_CALL_DEVICE_GET_COUNT:               "cuDeviceGetCount",
	C.TR_CALL_DEVICE_GET:                     "cuDeviceGet",
	C.TR_CALL_DEVICE_GET_NAME:                "cuDeviceGetName",
	C.TR_CALL_DEVICE_TOTAL_MEM:               "cuDeviceTotalMem",
	C.TR_CALL_PRIMARY_CTX_RETAIN:             "cuDevicePrimaryCtxRetain",
	C.TR_CALL_PRIMARY_CTX_RELEASE:            "cuDevicePrimaryCtxRelease",
}

// statusError turns a shim's status into an error, or nil. args are the
// arguments of the shim's main call; op, when not empty, names the Device
// operation that made several calls. A failed cuCtxSetCurrent is reported
// with op or, without one, with the main call's args as op.
func statusError(st C.tr_status, op, args string) error {
	if st.res == 0 {
		return nil
	}
	if st.call == C.TR_CALL_CTX_SET_CURRENT {
		if op == "" {
			op = args
		}
		args = "primary context"
	}
	return codeError(int(st.call), op, args, int(st.res))
}

func codeError(call int, op, args string, code int) error {
	name := ""
	if s := C.tr_error_name(C.CUresult(code)); s != nil {
		name = C.GoString(s)
	}
	c := "cuda call"
	if call >= 0 && call < len(callNames) {
		c = callNames[call]
	}
	return resultError(op, c, args, code, name)
}

var driver struct {
	once sync.Once
	err  error
}

// loadDriver loads libcuda.so.1 and initializes the driver, once per process.
func loadDriver() error {
	driver.once.Do(func() { driver.err = load(libcuda) })
	return driver.err
}

// load opens the driver library lib, resolves its entry points and calls
// cuInit. A missing library is ErrNoDriver.
func load(lib string) error {
	var buf [512]C.char
	var res C.CUresult
	clib := C.CString(lib)
	defer C.free(unsafe.Pointer(clib))
	switch C.tr_load(clib, &buf[0], C.size_t(len(buf)), &res) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("cuda: %w (%s: %s)", ErrNoDriver, lib, C.GoString(&buf[0]))
	case 2:
		return fmt.Errorf("cuda: %s lacks %s; the NVIDIA driver is too old (need CUDA 10.2 or newer)", lib, C.GoString(&buf[0]))
	default:
		err := codeError(C.TR_CALL_INIT, "", "0", int(res))
		if int(res) == 100 || int(res) == 34 { // CUDA_ERROR_NO_DEVICE, CUDA_ERROR_STUB_LIBRARY
			return fmt.Errorf("%w (%w)", err, ErrNoDriver)
		}
		return err
	}
}

// Device is one GPU driven through the CUDA driver API. It implements
// allocator.Device. It is safe for concurrent use: every call makes the
// device's primary context current on whichever OS thread runs it.
type Device struct {
	ordinal       int
	dev           C.CUdevice
	ctx           C.CUcontext
	name          string
	totalBytes    int64
	granularity   int64
	driverVersion int

	mu          sync.Mutex
	closed      bool
	resv        []*reservation     // by base address
	handles     map[uint64]mapping // page address → its physical memory
	mappedBytes int64
	scratch     []C.CUmemGenericAllocationHandle // reused by Map and Unmap
	timing      bool
	timings     Timings
}

// reservation is an address range from Reserve or ReservePaged.
type reservation struct {
	base   uint64
	size   int64
	page   int64 // bytes behind each physical handle Map creates
	mapped int64 // bytes mapped now
}

// mapping is one physical handle mapped at a page address.
type mapping struct {
	h    C.CUmemGenericAllocationHandle
	size int64
}

var _ allocator.Device = (*Device)(nil)

// Open loads the CUDA driver and retains the primary context of GPU ordinal
// (CUDA's numbering, which CUDA_VISIBLE_DEVICES changes). Without a driver
// the error wraps ErrNoDriver. Close releases the context.
func Open(ordinal int) (*Device, error) {
	if err := loadDriver(); err != nil {
		return nil, err
	}
	var info C.tr_device_info
	if err := statusError(C.tr_device_open(C.int(ordinal), &info), fmt.Sprintf("Open(GPU %d)", ordinal), ""); err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= int(info.count) {
		return nil, fmt.Errorf("cuda: no GPU %d: the driver sees %d GPUs (check CUDA_VISIBLE_DEVICES)", ordinal, int(info.count))
	}
	return &Device{
		ordinal:       ordinal,
		dev:           info.dev,
		ctx:           info.ctx,
		name:          C.GoString(&info.name[0]),
		totalBytes:    int64(info.totalMem),
		granularity:   int64(info.granularity),
		driverVersion: int(info.driverVersion),
		handles:       make(map[uint64]mapping),
	}, nil
}

// Close unmaps and releases the physical memory still mapped through Map and
// releases the primary context. Memory from Malloc and reservations still
// held are freed by the driver when the context goes. Close is idempotent.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	addrs := make([]uint64, 0, len(d.handles))
	for a := range d.handles {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for _, a := range addrs {
		m := d.handles[a]
		var done C.size_t
		if err := statusError(C.tr_unmap(d.ctx, C.CUdeviceptr(a), C.size_t(m.size), 1, &m.h, &done), "Close", rangeArg(a, m.size)); err != nil {
			errs = append(errs, err)
		}
		delete(d.handles, a)
	}
	d.mappedBytes = 0
	if err := statusError(C.tr_ctx_release(d.dev), "Close", fmt.Sprintf("GPU %d", d.ordinal)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Ordinal is the CUDA device ordinal given to Open.
func (d *Device) Ordinal() int { return d.ordinal }

// Name is the driver's device name, e.g. "NVIDIA H100 80GB HBM3".
func (d *Device) Name() string { return d.name }

// TotalBytes is the device's total memory (cuDeviceTotalMem).
func (d *Device) TotalBytes() int64 { return d.totalBytes }

// DriverVersion is the CUDA version the driver supports, as
// cuDriverGetVersion reports it: 1000*major + 10*minor (13000 for 13.0).
func (d *Device) DriverVersion() int { return d.driverVersion }

// Granularity is the minimum physical allocation granularity of pinned
// device memory (cuMemGetAllocationGranularity), 2 MiB on current GPUs.
func (d *Device) Granularity() int64 { return d.granularity }

// SetTiming turns latency accounting on or off and clears what was
// accumulated. It is off after Open.
func (d *Device) SetTiming(on bool) {
	d.mu.Lock()
	d.timing = on
	d.timings = Timings{}
	d.mu.Unlock()
}

// Timings returns the latencies accumulated since SetTiming(true).
func (d *Device) Timings() Timings {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.timings
}

// errClosed is returned by every call on a closed Device.
var errClosed = errors.New("cuda: device is closed")

// start locks d and returns the time to measure from (zero when timing is
// off), or errClosed.
func (d *Device) start() (time.Time, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return time.Time{}, errClosed
	}
	if d.timing {
		return time.Now(), nil
	}
	return time.Time{}, nil
}

// end records the latency since t0 into l (when timing is on) and unlocks d.
func (d *Device) end(t0 time.Time, l *Latency) {
	if d.timing {
		l.add(time.Since(t0))
	}
	d.mu.Unlock()
}

// Malloc allocates size bytes with cuMemAlloc.
func (d *Device) Malloc(size int64) (uint64, error) {
	if size <= 0 {
		return 0, fmt.Errorf("cuda: Malloc(%d bytes): size must be positive", size)
	}
	t0, err := d.start()
	if err != nil {
		return 0, err
	}
	var p C.CUdeviceptr
	st := C.tr_malloc(d.ctx, &p, C.size_t(size))
	d.end(t0, &d.timings.Malloc)
	if st.res != 0 {
		return 0, statusError(st, "", bytesArg(size))
	}
	return uint64(p), nil
}

// Free releases memory from Malloc with cuMemFree.
func (d *Device) Free(addr uint64) error {
	t0, err := d.start()
	if err != nil {
		return err
	}
	st := C.tr_free(d.ctx, C.CUdeviceptr(addr))
	d.end(t0, &d.timings.Free)
	if st.res != 0 {
		return statusError(st, "", fmt.Sprintf("%#x", addr))
	}
	return nil
}

// roundUp rounds n up to a multiple of g.
func roundUp(n, g int64) int64 { return (n + g - 1) / g * g }

// Reserve reserves size bytes of address space (cuMemAddressReserve),
// aligned to the granularity; Map then backs it with one physical handle per
// granule. It is ReservePaged(size, Granularity()).
func (d *Device) Reserve(size int64) (uint64, error) {
	return d.ReservePaged(size, d.granularity)
}

// ReservePaged reserves size bytes of address space (cuMemAddressReserve)
// whose Map calls create one physical handle per pageSize bytes, as
// PyTorch's ExpandableSegment does per page (2 MiB in the small pool, 20 MiB
// in the large): Map and Unmap of this reservation then take whole pages,
// counted from its start. pageSize must be a positive multiple of
// Granularity; size is rounded up to a multiple of pageSize, and Release
// frees what was reserved.
func (d *Device) ReservePaged(size, pageSize int64) (uint64, error) {
	if size <= 0 || pageSize <= 0 || pageSize%d.granularity != 0 {
		return 0, fmt.Errorf("cuda: ReservePaged(%d bytes, page %d bytes): size must be positive and the page a multiple of the granularity (%d bytes)", size, pageSize, d.granularity)
	}
	size = roundUp(size, pageSize)
	t0, err := d.start()
	if err != nil {
		return 0, err
	}
	var p C.CUdeviceptr
	st := C.tr_reserve(d.ctx, &p, C.size_t(size), C.size_t(d.granularity))
	if st.res == 0 {
		r := &reservation{base: uint64(p), size: size, page: pageSize}
		i, _ := slices.BinarySearchFunc(d.resv, r.base, cmpBase)
		d.resv = slices.Insert(d.resv, i, r)
	}
	d.end(t0, &d.timings.Reserve)
	if st.res != 0 {
		return 0, statusError(st, "", bytesArg(size))
	}
	return uint64(p), nil
}

func cmpBase(r *reservation, base uint64) int {
	switch {
	case r.base < base:
		return -1
	case r.base > base:
		return 1
	}
	return 0
}

// reservationAt returns the reservation holding addr, or nil. d.mu is held.
func (d *Device) reservationAt(addr uint64) *reservation {
	i, found := slices.BinarySearchFunc(d.resv, addr, cmpBase)
	if found {
		return d.resv[i]
	}
	if i > 0 && addr < d.resv[i-1].base+uint64(d.resv[i-1].size) {
		return d.resv[i-1]
	}
	return nil
}

// Release frees a reservation (cuMemAddressFree). It must be unmapped. The
// size freed is the one reserved; size matters only for ranges this Device
// did not reserve.
func (d *Device) Release(addr uint64, size int64) error {
	t0, err := d.start()
	if err != nil {
		return err
	}
	size = roundUp(size, d.granularity)
	i, found := slices.BinarySearchFunc(d.resv, addr, cmpBase)
	if found {
		r := d.resv[i]
		if r.mapped != 0 {
			d.mu.Unlock()
			return fmt.Errorf("cuda: Release(%s): %d bytes are still mapped; Unmap them first", rangeArg(addr, size), r.mapped)
		}
		size = r.size
	}
	st := C.tr_address_free(d.ctx, C.CUdeviceptr(addr), C.size_t(size))
	if st.res == 0 && found {
		d.resv = slices.Delete(d.resv, i, i+1)
	}
	d.end(t0, &d.timings.Release)
	if st.res != 0 {
		return statusError(st, "", rangeArg(addr, size))
	}
	return nil
}

// pages checks a Map/Unmap range and returns its page size and count and
// its reservation (nil outside any: then pages are granules). d.mu is held.
func (d *Device) pages(op string, addr uint64, size int64) (page int64, n int, r *reservation, err error) {
	page, off := d.granularity, addr
	if r = d.reservationAt(addr); r != nil {
		page, off = r.page, addr-r.base
		if addr+uint64(size) > r.base+uint64(r.size) {
			return 0, 0, nil, fmt.Errorf("cuda: %s(%s): range ends past its reservation (%s)", op, rangeArg(addr, size), rangeArg(r.base, r.size))
		}
	}
	if size <= 0 || size%page != 0 || off%uint64(page) != 0 {
		return 0, 0, nil, fmt.Errorf("cuda: %s(%s): address and size must be positive multiples of the page (%d bytes)", op, rangeArg(addr, size), page)
	}
	return page, int(size / page), r, nil
}

// Map backs [addr, addr+size) with physical memory: one cuMemCreate handle
// per page (a granule, or the page size given to ReservePaged), each mapped
// with cuMemMap, then one cuMemSetAccess granting the device read/write
// access to the range. addr and size must be whole pages. Out of memory
// wraps allocator.ErrDeviceOOM; on any failure nothing stays mapped.
func (d *Device) Map(addr uint64, size int64) error {
	t0, err := d.start()
	if err != nil {
		return err
	}
	page, n, r, err := d.pages("Map", addr, size)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	p := uint64(page)
	for i := range uint64(n) {
		if _, ok := d.handles[addr+i*p]; ok {
			d.mu.Unlock()
			return fmt.Errorf("cuda: Map(%s): page %#x is already mapped", rangeArg(addr, size), addr+i*p)
		}
	}
	h := d.scratchHandles(n)
	st := C.tr_map(d.ctx, d.dev, C.CUdeviceptr(addr), C.size_t(p), C.size_t(n), &h[0])
	if st.res == 0 {
		for i := range uint64(n) {
			d.handles[addr+i*p] = mapping{h: h[i], size: page}
		}
		d.mappedBytes += size
		if r != nil {
			r.mapped += size
		}
	}
	d.end(t0, &d.timings.Map)
	if st.res != 0 {
		args := bytesArg(page)
		if st.call == C.TR_CALL_MEM_SET_ACCESS {
			args = rangeArg(addr, size)
		}
		return statusError(st, fmt.Sprintf("Map(%s)", rangeArg(addr, size)), args)
	}
	return nil
}

// Unmap unmaps [addr, addr+size) and releases its handles (cuMemUnmap and
// cuMemRelease per page). The range may be any page-aligned part of what
// earlier Map calls mapped, but all of it must be mapped. It does not
// synchronize: callers that launched work on the memory synchronize first.
func (d *Device) Unmap(addr uint64, size int64) error {
	t0, err := d.start()
	if err != nil {
		return err
	}
	page, n, r, err := d.pages("Unmap", addr, size)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	p := uint64(page)
	h := d.scratchHandles(n)
	for i := range uint64(n) {
		m, ok := d.handles[addr+i*p]
		if !ok || m.size != page {
			d.mu.Unlock()
			return fmt.Errorf("cuda: Unmap(%s): page %#x is not mapped", rangeArg(addr, size), addr+i*p)
		}
		h[i] = m.h
	}
	var done C.size_t
	st := C.tr_unmap(d.ctx, C.CUdeviceptr(addr), C.size_t(p), C.size_t(n), &h[0], &done)
	for i := range uint64(done) {
		delete(d.handles, addr+i*p)
	}
	d.mappedBytes -= int64(done) * page
	if r != nil {
		r.mapped -= int64(done) * page
	}
	d.end(t0, &d.timings.Unmap)
	if st.res != 0 {
		a := addr + uint64(done)*p
		if st.call == C.TR_CALL_MEM_RELEASE {
			a -= p
		}
		return statusError(st, fmt.Sprintf("Unmap(%s)", rangeArg(addr, size)), rangeArg(a, page))
	}
	return nil
}

// scratchHandles returns d's reusable handle buffer, grown to n. d.mu is held.
func (d *Device) scratchHandles(n int) []C.CUmemGenericAllocationHandle {
	if cap(d.scratch) < n {
		d.scratch = make([]C.CUmemGenericAllocationHandle, n)
	}
	return d.scratch[:n]
}

// Mapped reports how many bytes are mapped through Map and not yet unmapped.
func (d *Device) Mapped() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mappedBytes
}

// MemInfo reports free and total device memory (cuMemGetInfo).
func (d *Device) MemInfo() (free, total int64, err error) {
	if _, err := d.start(); err != nil {
		return 0, 0, err
	}
	defer d.mu.Unlock()
	var f, t C.size_t
	if err := statusError(C.tr_mem_info(d.ctx, &f, &t), "", ""); err != nil {
		return 0, 0, err
	}
	return int64(f), int64(t), nil
}

// Synchronize waits for all work on the device's context (cuCtxSynchronize).
func (d *Device) Synchronize() error {
	if _, err := d.start(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	return statusError(C.tr_synchronize(d.ctx), "", "")
}

// memsetD8 sets n bytes at addr to v (cuMemsetD8); for tests.
func (d *Device) memsetD8(addr uint64, v byte, n int64) error {
	if _, err := d.start(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	return statusError(C.tr_memset_d8(d.ctx, C.CUdeviceptr(addr), C.uchar(v), C.size_t(n)), "", rangeArg(addr, n))
}

// memcpyDtoH copies len(dst) bytes from device address src (cuMemcpyDtoH);
// for tests.
func (d *Device) memcpyDtoH(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if _, err := d.start(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	return statusError(C.tr_memcpy_dtoh(d.ctx, unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst))), "", rangeArg(src, int64(len(dst))))
}
