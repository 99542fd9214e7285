package cuda

import (
	"errors"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
)

func TestResultError(t *testing.T) {
	tests := []struct {
		op, call, args string
		code           int
		name           string
		want           string
		oom            bool
	}{
		{"", "cuMemAlloc", "2097152 bytes", 2, "CUDA_ERROR_OUT_OF_MEMORY", "cuda: cuMemAlloc(2097152 bytes): CUDA_ERROR_OUT_OF_MEMORY", true},
		{"", "cuMemAlloc", "2097152 bytes", 2, "", "cuda: cuMemAlloc(2097152 bytes): CUDA_ERROR_OUT_OF_MEMORY", true},
		{"Map(0x200000, 4194304 bytes)", "cuMemCreate", "2097152 bytes", 2, "", "cuda: Map(0x200000, 4194304 bytes): cuMemCreate(2097152 bytes): CUDA_ERROR_OUT_OF_MEMORY", true},
		{"", "cuMemFree", "0x1", 1, "CUDA_ERROR_INVALID_VALUE", "cuda: cuMemFree(0x1): CUDA_ERROR_INVALID_VALUE", false},
		{"", "cuInit", "0", 100, "", "cuda: cuInit(0): CUDA_ERROR_NO_DEVICE", false},
		{"", "cuMemMap", "x", 12345, "", "cuda: cuMemMap(x): CUresult(12345)", false},
	}
	for _, tc := range tests {
		err := resultError(tc.op, tc.call, tc.args, tc.code, tc.name)
		if err == nil {
			t.Fatalf("resultError(%q, %d) = nil", tc.call, tc.code)
		}
		if got := err.Error(); got != tc.want {
			t.Errorf("resultError(%q, %d) = %q, want %q", tc.call, tc.code, got, tc.want)
		}
		if got := errors.Is(err, allocator.ErrDeviceOOM); got != tc.oom {
			t.Errorf("errors.Is(%q, ErrDeviceOOM) = %v, want %v", err, got, tc.oom)
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != tc.code || ce.Call != tc.call {
			t.Errorf("errors.As(%q, *Error) = %+v", err, ce)
		}
	}
	if err := resultError("", "cuMemAlloc", "1 bytes", 0, ""); err != nil {
		t.Errorf("resultError(CUDA_SUCCESS) = %v, want nil", err)
	}
}
