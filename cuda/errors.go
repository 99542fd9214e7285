package cuda

import (
	"errors"
	"fmt"

	"github.com/tracer-dev/tracer/allocator"
)

// ErrNoDriver is wrapped by the errors of Open, Query and StartMemorySampler
// when this machine has no usable NVIDIA driver: libcuda.so.1 or
// libnvidia-ml.so.1 cannot be loaded, or the binary was built without cgo.
// Callers fall back to the simulated device on it.
var ErrNoDriver = errors.New("no CUDA driver found")

// cudaErrorOutOfMemory is CUDA_ERROR_OUT_OF_MEMORY, the one CUresult the
// allocator acts on (it frees cached blocks and retries).
const cudaErrorOutOfMemory = 2

// Error is a failed CUDA driver call. Its message names the call, its
// arguments and the CUDA error name, after the Device operation when that
// made several driver calls:
//
//	cuda: cuMemAlloc(2097152 bytes): CUDA_ERROR_OUT_OF_MEMORY
//	cuda: Map(0x7f2a00000000, 41943040 bytes): cuMemCreate(2097152 bytes): CUDA_ERROR_OUT_OF_MEMORY
//
// An Error with Code CUDA_ERROR_OUT_OF_MEMORY wraps allocator.ErrDeviceOOM,
// so errors.Is(err, allocator.ErrDeviceOOM) holds for it.
type Error struct {
	Op   string // the Device operation, e.g. "Map(0x7f2a00000000, 41943040 bytes)"; may be empty
	Call string // driver entry point without its _v2 suffix, e.g. "cuMemAlloc"
	Args string // the call's arguments as the message shows them, e.g. "2097152 bytes"
	Code int    // the CUresult
	Name string // the CUresult's name, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
}

func (e *Error) Error() string {
	if e.Op != "" {
		return fmt.Sprintf("cuda: %s: %s(%s): %s", e.Op, e.Call, e.Args, e.Name)
	}
	return fmt.Sprintf("cuda: %s(%s): %s", e.Call, e.Args, e.Name)
}

// Unwrap returns allocator.ErrDeviceOOM for CUDA_ERROR_OUT_OF_MEMORY, nil
// otherwise.
func (e *Error) Unwrap() error {
	if e.Code == cudaErrorOutOfMemory {
		return allocator.ErrDeviceOOM
	}
	return nil
}

// resultError turns the CUresult code of call (made for op, which may be
// empty) into an *Error, or nil for CUDA_SUCCESS. name is the driver's
// cuGetErrorName for code; when it is empty (the driver could not name it)
// a built-in table is used.
func resultError(op, call, args string, code int, name string) error {
	if code == 0 {
		return nil
	}
	if name == "" {
		name = resultName(code)
	}
	return &Error{Op: op, Call: call, Args: args, Code: code, Name: name}
}

// resultNames holds the CUresult names this package may print without the
// driver's help (cuda.h of CUDA 12/13).
var resultNames = map[int]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	46:  "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	801: "CUDA_ERROR_NOT_SUPPORTED",
	999: "CUDA_ERROR_UNKNOWN",
}

// resultName names a CUresult from the built-in table, or "CUresult(N)".
func resultName(code int) string {
	if n, ok := resultNames[code]; ok {
		return n
	}
	return fmt.Sprintf("CUresult(%d)", code)
}

// bytesArg formats a size argument the way Error messages show it.
func bytesArg(n int64) string { return fmt.Sprintf("%d bytes", n) }

// rangeArg formats an address range argument: "0x7f0000000000, 2097152 bytes".
func rangeArg(addr uint64, n int64) string { return fmt.Sprintf("%#x, %d bytes", addr, n) }
