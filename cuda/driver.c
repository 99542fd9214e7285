//go:build cgo

// driver.c calls the CUDA driver API through function pointers resolved
// with dlopen/dlsym at run time (see doc.go). Each tr_* shim is one cgo
// crossing: it makes the context current and then makes its driver calls.

#include <dlfcn.h>
#include <string.h>

#include "driver.h"

// Driver entry points, resolved once by tr_load.
typedef struct {
	CUresult (*init)(unsigned int);
	CUresult (*driverGetVersion)(int *);
	CUresult (*getErrorName)(CUresult, const char **);
	CUresult (*deviceGetCount)(int *);
	CUresult (*deviceGet)(CUdevice *, int);
	CUresult (*deviceGetName)(char *, int, CUdevice);
	CUresult (*deviceTotalMem)(size_t *, CUdevice);
	CUresult (*primaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*primaryCtxRelease)(CUdevice);
	CUresult (*ctxSetCurrent)(CUcontext);
	CUresult (*ctxSynchronize)(void);
	CUresult (*memAlloc)(CUdeviceptr *, size_t);
	CUresult (*memFree)(CUdeviceptr);
	CUresult (*memGetInfo)(size_t *, size_t *);
	CUresult (*memAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*memAddressFree)(CUdeviceptr, size_t);
	CUresult (*memCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*memRelease)(CUmemGenericAllocationHandle);
	CUresult (*memMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*memUnmap)(CUdeviceptr, size_t);
	CUresult (*memSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*memGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, int);
	CUresult (*memsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t);
} tr_api;

static tr_api tr; // the driver, once tr_load succeeded

static tr_status tr_fail(CUresult res, int call) {
	tr_status s = {res, call};
	return s;
}

#define TR_OK tr_fail(0, TR_CALL_NONE)
#define TR_TRY(call, expr)                      \
	do {                                        \
		CUresult r_ = (expr);                   \
		if (r_ != 0) return tr_fail(r_, call); \
	} while (0)

// tr_load opens lib and resolves every entry point, then calls cuInit(0).
// It returns 0, or 1 with dlerror() in err when lib cannot be opened, or 2
// with the missing symbol in err, or 3 with cuInit's result in *res.
int tr_load(const char *lib, char *err, size_t errlen, CUresult *res) {
	*res = 0;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
		return 1;
	}
	tr_api a;
	memset(&a, 0, sizeof a);
#define TR_SYM(field, name)                     \
	if (a.field == NULL) a.field = dlsym(h, name);
#define TR_NEED(field, name)                    \
	TR_SYM(field, name)                         \
	if (a.field == NULL) {                      \
		strncpy(err, name, errlen - 1);         \
		err[errlen - 1] = 0;                    \
		dlclose(h);                             \
		return 2;                               \
	}
	TR_NEED(init, "cuInit")
	TR_NEED(driverGetVersion, "cuDriverGetVersion")
	TR_NEED(getErrorName, "cuGetErrorName")
	TR_NEED(deviceGetCount, "cuDeviceGetCount")
	TR_NEED(deviceGet, "cuDeviceGet")
	TR_NEED(deviceGetName, "cuDeviceGetName")
	TR_NEED(deviceTotalMem, "cuDeviceTotalMem_v2")
	TR_NEED(primaryCtxRetain, "cuDevicePrimaryCtxRetain")
	TR_SYM(primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
	TR_NEED(primaryCtxRelease, "cuDevicePrimaryCtxRelease")
	TR_NEED(ctxSetCurrent, "cuCtxSetCurrent")
	TR_NEED(ctxSynchronize, "cuCtxSynchronize")
	TR_NEED(memAlloc, "cuMemAlloc_v2")
	TR_NEED(memFree, "cuMemFree_v2")
	TR_NEED(memGetInfo, "cuMemGetInfo_v2")
	TR_NEED(memAddressReserve, "cuMemAddressReserve")
	TR_NEED(memAddressFree, "cuMemAddressFree")
	TR_NEED(memCreate, "cuMemCreate")
	TR_NEED(memRelease, "cuMemRelease")
	TR_NEED(memMap, "cuMemMap")
	TR_NEED(memUnmap, "cuMemUnmap")
	TR_NEED(memSetAccess, "cuMemSetAccess")
	TR_NEED(memGetAllocationGranularity, "cuMemGetAllocationGranularity")
	TR_NEED(memsetD8, "cuMemsetD8_v2")
	TR_NEED(memcpyDtoH, "cuMemcpyDtoH_v2")
#undef TR_NEED
#undef TR_SYM
	CUresult r = a.init(0);
	if (r != 0) {
		// Keep the library: cuGetErrorName still works and names r.
		tr.getErrorName = a.getErrorName;
		*res = r;
		return 3;
	}
	tr = a;
	return 0;
}

// tr_error_name returns cuGetErrorName(res), or NULL.
const char *tr_error_name(CUresult res) {
	const char *s = NULL;
	if (tr.getErrorName == NULL || tr.getErrorName(res, &s) != 0) return NULL;
	return s;
}

// tr_device_open retains the primary context of device ordinal and reads its
// properties. On failure nothing stays retained.
tr_status tr_device_open(int ordinal, tr_device_info *d) {
	memset(d, 0, sizeof *d);
	TR_TRY(TR_CALL_DRIVER_GET_VERSION, tr.driverGetVersion(&d->driverVersion));
	TR_TRY(TR_CALL_DEVICE_GET_COUNT, tr.deviceGetCount(&d->count));
	if (ordinal < 0 || ordinal >= d->count) return TR_OK; // Go reports it
	TR_TRY(TR_CALL_DEVICE_GET, tr.deviceGet(&d->dev, ordinal));
	TR_TRY(TR_CALL_DEVICE_GET_NAME, tr.deviceGetName(d->name, sizeof d->name - 1, d->dev));
	TR_TRY(TR_CALL_DEVICE_TOTAL_MEM, tr.deviceTotalMem(&d->totalMem, d->dev));
	TR_TRY(TR_CALL_PRIMARY_CTX_RETAIN, tr.primaryCtxRetain(&d->ctx, d->dev));
	CUresult r = tr.ctxSetCurrent(d->ctx);
	int call = TR_CALL_CTX_SET_CURRENT;
	if (r == 0) {
		CUmemAllocationProp prop;
		memset(&prop, 0, sizeof prop);
		prop.type = TR_ALLOCATION_PINNED;
		prop.location.type = TR_LOCATION_DEVICE;
		prop.location.id = d->dev;
		r = tr.memGetAllocationGranularity(&d->granularity, &prop, TR_GRANULARITY_MINIMUM);
		call = TR_CALL_MEM_GET_ALLOCATION_GRANULARITY;
	}
	if (r != 0) {
		tr.primaryCtxRelease(d->dev);
		d->ctx = NULL;
		return tr_fail(r, call);
	}
	return TR_OK;
}

tr_status tr_ctx_release(CUdevice dev) {
	TR_TRY(TR_CALL_PRIMARY_CTX_RELEASE, tr.primaryCtxRelease(dev));
	return TR_OK;
}

// Every operation below first makes ctx current on the calling thread, so
// that a goroutine may run on any OS thread: one cgo crossing per operation.

tr_status tr_malloc(CUcontext ctx, CUdeviceptr *p, size_t size) {
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	TR_TRY(TR_CALL_MEM_ALLOC, tr.memAlloc(p, size));
	return TR_OK;
}

tr_status tr_free(CUcontext ctx, CUdeviceptr p) {
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	TR_TRY(TR_CALL_MEM_FREE, tr.memFree(p));
	return TR_OK;
}

tr_status tr_reserve(CUcontext ctx, CUdeviceptr *p, size_t size, size_t align) {
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	TR_TRY(TR_CALL_MEM_ADDRESS_RESERVE, tr.memAddressReserve(p, size, align, 0, 0));
	return TR_OK;
}

tr_status tr_address_free(CUcontext ctx, CUdeviceptr p, size_t size) {
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	TR_TRY(TR_CALL_MEM_ADDRESS_FREE, tr.memAddressFree(p, size));
	return TR_OK;
}

// tr_map backs n pages of page bytes from addr, one cuMemCreate handle
// each (stored in h[0..n)), then grants the device read/write access to the
// whole range, as PyTorch's ExpandableSegment::map does. On failure it
// undoes everything it did.
tr_status tr_map(CUcontext ctx, CUdevice dev, CUdeviceptr addr, size_t page, size_t n, CUmemGenericAllocationHandle *h) {
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = TR_ALLOCATION_PINNED;
	prop.location.type = TR_LOCATION_DEVICE;
	prop.location.id = dev;
	CUresult r = 0;
	int call = TR_CALL_NONE;
	size_t i;
	for (i = 0; i < n; i++) {
		r = tr.memCreate(&h[i], page, &prop, 0);
		if (r != 0) {
			call = TR_CALL_MEM_CREATE;
			goto undo;
		}
		r = tr.memMap(addr + i * page, page, 0, h[i], 0);
		if (r != 0) {
			tr.memRelease(h[i]);
			call = TR_CALL_MEM_MAP;
			goto undo;
		}
	}
	CUmemAccessDesc desc;
	memset(&desc, 0, sizeof desc);
	desc.location.type = TR_LOCATION_DEVICE;
	desc.location.id = dev;
	desc.flags = TR_ACCESS_READWRITE;
	r = tr.memSetAccess(addr, page * n, &desc, 1);
	if (r == 0) return TR_OK;
	call = TR_CALL_MEM_SET_ACCESS;
undo:
	while (i > 0) {
		i--;
		tr.memUnmap(addr + i * page, page);
		tr.memRelease(h[i]);
	}
	return tr_fail(r, call);
}

// tr_unmap unmaps n pages of page bytes from addr and releases their
// handles h[0..n). *done counts the pages unmapped before a failure.
tr_status tr_unmap(CUcontext ctx, CUdeviceptr addr, size_t page, size_t n, const CUmemGenericAllocationHandle *h, size_t *done) {
	*done = 0;
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	for (size_t i = 0; i < n; i++) {
		TR_TRY(TR_CALL_MEM_UNMAP, tr.memUnmap(addr + i * page, page));
		*done = i + 1;
		TR_TRY(TR_CALL_MEM_RELEASE, tr.memRelease(h[i]));
	}
	return TR_OK;
}

tr_status tr_mem_info(CUcontext ctx, size_t *free_bytes, size_t *total_bytes) {
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	TR_TRY(TR_CALL_MEM_GET_INFO, tr.memGetInfo(free_bytes, total_bytes));
	return TR_OK;
}

tr_status tr_synchronize(CUcontext ctx) {
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	TR_TRY(TR_CALL_CTX_SYNCHRONIZE, tr.ctxSynchronize());
	return TR_OK;
}

tr_status tr_memset_d8(CUcontext ctx, CUdeviceptr p, unsigned char v, size_t n) {
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	TR_TRY(TR_CALL_MEMSET_D8, tr.memsetD8(p, v, n));
	return TR_OK;
}

tr_status tr_memcpy_dtoh(CUcontext ctx, void *dst, CUdeviceptr src, size_t n) {
	TR_TRY(TR_CALL_CTX_SET_CURRENT, tr.ctxSetCurrent(ctx));
	TR_TRY(TR_CALL_MEMCPY_DTOH, tr.memcpyDtoH(dst, src, n));
	return TR_OK;
}
