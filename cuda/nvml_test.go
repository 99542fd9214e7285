//go:build cgo

package cuda

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// mockH100 is an NVML with one H100 whose used memory grows by 1 MiB per
// query, and one compute process.
func mockH100() (*mock.Interface, *mock.Device) {
	used := uint64(500 << 20)
	const total = 80 << 30
	dev := &mock.Device{
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-00000000-1111-2222-3333-444444444444", nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			used += 1 << 20
			return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{
				{Pid: 4242, UsedGpuMemory: 1 << 30},
				{Pid: 4343, UsedGpuMemory: ^uint64(0)},
			}, nvml.SUCCESS
		},
	}
	lib := &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "580.65.06", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 13000, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i != 0 {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return dev, nvml.SUCCESS
		},
	}
	return lib, dev
}

func TestQuery_mock(t *testing.T) {
	lib, _ := mockH100()
	info, err := query(lib, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "NVIDIA H100 80GB HBM3" || info.UUID == "" || info.DriverVersion != "580.65.06" || info.CUDADriverVersion != 13000 {
		t.Errorf("info = %+v", info)
	}
	if info.TotalBytes != 80<<30 || info.UsedBytes != 501<<20 || info.FreeBytes != 80<<30-501<<20 {
		t.Errorf("memory total %d used %d free %d", info.TotalBytes, info.UsedBytes, info.FreeBytes)
	}
	want := []Process{{PID: 4242, UsedBytes: 1 << 30}, {PID: 4343, UsedBytes: -1}}
	if len(info.Processes) != 2 || info.Processes[0] != want[0] || info.Processes[1] != want[1] {
		t.Errorf("processes = %v, want %v", info.Processes, want)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
}

func TestQuery_errors(t *testing.T) {
	lib, dev := mockH100()
	if _, err := query(lib, 3); err == nil || !strings.Contains(err.Error(), "cuda: nvmlDeviceGetHandleByIndex(GPU 3): ") {
		t.Errorf("query(GPU 3) error = %v", err)
	}
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	_, err := query(lib, 0)
	if !errors.Is(err, nvml.ERROR_GPU_IS_LOST) || !strings.HasPrefix(err.Error(), "cuda: nvmlDeviceGetMemoryInfo(GPU 0): ") {
		t.Errorf("query with a lost GPU: error = %v", err)
	}
	dev.GetUUIDFunc = nil // the mock panics on an unset method
	if _, err := query(lib, 0); err == nil || !strings.Contains(err.Error(), "NVML failed") {
		t.Errorf("query with a panicking NVML: error = %v", err)
	}
	if n, m := len(lib.InitCalls()), len(lib.ShutdownCalls()); n != m {
		t.Errorf("Init called %d times, Shutdown %d", n, m)
	}
}

func TestQuery_noLibrary(t *testing.T) {
	lib, _ := mockH100()
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	_, err := query(lib, 0)
	if !errors.Is(err, ErrNoDriver) || !errors.Is(err, nvml.ERROR_LIBRARY_NOT_FOUND) {
		t.Errorf("error = %v, want ErrNoDriver and ERROR_LIBRARY_NOT_FOUND", err)
	}
	if n := len(lib.ShutdownCalls()); n != 0 {
		t.Errorf("Shutdown called %d times after a failed Init", n)
	}
}

// TestQuery_realNoGPU runs the real go-nvml: without a GPU it must fail
// cleanly, not panic.
func TestQuery_realNoGPU(t *testing.T) {
	if gpuTests() {
		t.Skip("TRACER_GPU=1: see TestGPU_query")
	}
	if _, err := Query(0); err == nil {
		t.Log("NVML present on this machine; nothing to check")
	} else {
		t.Logf("Query(0) = %v", err)
	}
}

func TestMemorySampler_mock(t *testing.T) {
	lib, _ := mockH100()
	tick := make(chan time.Time)
	s, err := startMemorySampler(lib, 0, tick, func() {})
	if err != nil {
		t.Fatal(err)
	}
	if s.Latest() != 501<<20 {
		t.Errorf("first reading %d, want %d", s.Latest(), 501<<20)
	}
	tick <- time.Time{}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.Samples() != 3 || s.Latest() != 503<<20 {
		t.Errorf("%d samples, latest %d; want 3 and %d", s.Samples(), s.Latest(), 503<<20)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
	if _, err := startMemorySampler(lib, 5, tick, func() {}); err == nil {
		t.Error("sampler on GPU 5 started")
	}
	if n := len(lib.ShutdownCalls()); n != 2 {
		t.Errorf("Shutdown called %d times after a failed start, want 2", n)
	}
}

func TestStartMemorySampler_short(t *testing.T) {
	if !gpuTests() {
		t.Skip("needs NVML; set TRACER_GPU=1")
	}
	s, err := StartMemorySampler(0, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.Samples() < 3 || s.Latest() <= 0 {
		t.Errorf("%d samples in 50ms at 5ms, latest %d", s.Samples(), s.Latest())
	}
	t.Logf("%d samples, last used %d MiB", s.Samples(), s.Latest()>>20)
}
