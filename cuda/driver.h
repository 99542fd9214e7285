// driver.h declares the CUDA driver API types this package uses, with the
// layouts of cuda.h (CUDA 12 and 13), and the C shims of driver.c. Building
// needs no CUDA headers.

#ifndef TRACER_CUDA_DRIVER_H
#define TRACER_CUDA_DRIVER_H

#include <stddef.h>

// The CUDA types, as in cuda.h; its enums are int-sized. The static
// assertions pin the layouts the driver reads.
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct {
	int type; // CUmemLocationType: CU_MEM_LOCATION_TYPE_DEVICE = 1
	int id;   // device ordinal
} CUmemLocation;

typedef struct {
	int type;                 // CUmemAllocationType: CU_MEM_ALLOCATION_TYPE_PINNED = 1
	int requestedHandleTypes; // CUmemAllocationHandleType: CU_MEM_HANDLE_TYPE_NONE = 0
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef struct {
	CUmemLocation location;
	int flags; // CUmemAccess_flags: CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
} CUmemAccessDesc;

_Static_assert(sizeof(CUmemLocation) == 8, "CUmemLocation layout");
_Static_assert(offsetof(CUmemAllocationProp, location) == 8, "CUmemAllocationProp layout");
_Static_assert(offsetof(CUmemAllocationProp, win32HandleMetaData) == 16, "CUmemAllocationProp layout");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) == 24, "CUmemAllocationProp layout");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp layout");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc layout");

enum {
	TR_LOCATION_DEVICE = 1,
	TR_ALLOCATION_PINNED = 1,
	TR_ACCESS_READWRITE = 3,
	TR_GRANULARITY_MINIMUM = 0,
};

// Which call failed; index into callNames on the Go side.
enum {
	TR_CALL_NONE,
	TR_CALL_CTX_SET_CURRENT,
	TR_CALL_MEM_ALLOC,
	TR_CALL_MEM_FREE,
	TR_CALL_MEM_ADDRESS_RESERVE,
	TR_CALL_MEM_ADDRESS_FREE,
	TR_CALL_MEM_CREATE,
	TR_CALL_MEM_MAP,
	TR_CALL_MEM_SET_ACCESS,
	TR_CALL_MEM_UNMAP,
	TR_CALL_MEM_RELEASE,
	TR_CALL_MEM_GET_INFO,
	TR_CALL_MEM_GET_ALLOCATION_GRANULARITY,
	TR_CALL_CTX_SYNCHRONIZE,
	TR_CALL_MEMSET_D8,
	TR_CALL_MEMCPY_DTOH,
	TR_CALL_INIT,
	TR_CALL_DRIVER_GET_VERSION,
	TR_CALL_DEVICE_GET_COUNT,
	TR_CALL_DEVICE_GET,
	TR_CALL_DEVICE_GET_NAME,
	TR_CALL_DEVICE_TOTAL_MEM,
	TR_CALL_PRIMARY_CTX_RETAIN,
	TR_CALL_PRIMARY_CTX_RELEASE,
};

typedef struct {
	CUresult res; // CUDA_SUCCESS (0) or the failing call's result
	int call;     // TR_CALL_* of the failing call
} tr_status;

typedef struct {
	CUdevice dev;
	CUcontext ctx;
	int count;
	int driverVersion;
	size_t totalMem;
	size_t granularity;
	char name[256];
} tr_device_info;

int tr_load(const char *lib, char *err, size_t errlen, CUresult *res);
const char *tr_error_name(CUresult res);
tr_status tr_device_open(int ordinal, tr_device_info *d);
tr_status tr_ctx_release(CUdevice dev);
tr_status tr_malloc(CUcontext ctx, CUdeviceptr *p, size_t size);
tr_status tr_free(CUcontext ctx, CUdeviceptr p);
tr_status tr_reserve(CUcontext ctx, CUdeviceptr *p, size_t size, size_t align);
tr_status tr_address_free(CUcontext ctx, CUdeviceptr p, size_t size);
tr_status tr_map(CUcontext ctx, CUdevice dev, CUdeviceptr addr, size_t page, size_t n, CUmemGenericAllocationHandle *h);
tr_status tr_unmap(CUcontext ctx, CUdeviceptr addr, size_t page, size_t n, const CUmemGenericAllocationHandle *h, size_t *done);
tr_status tr_mem_info(CUcontext ctx, size_t *free_bytes, size_t *total_bytes);
tr_status tr_synchronize(CUcontext ctx);
tr_status tr_memset_d8(CUcontext ctx, CUdeviceptr p, unsigned char v, size_t n);
tr_status tr_memcpy_dtoh(CUcontext ctx, void *dst, CUdeviceptr src, size_t n);

#endif
