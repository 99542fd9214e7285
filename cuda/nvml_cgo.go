//go:build cgo

package cuda

import (
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlLib is the part of go-nvml's nvml.Interface this package uses; tests
// pass go-nvml's mock.Interface.
type nvmlLib interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	SystemGetCudaDriverVersion() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
}

// newNVML returns the real NVML; it loads libnvidia-ml.so.1 on Init.
func newNVML() nvmlLib { return nvml.New() }

// Query reports what NVML knows about GPU index (NVML's numbering, which
// ignores CUDA_VISIBLE_DEVICES). Without NVML the error wraps ErrNoDriver.
func Query(index int) (*Info, error) { return query(newNVML(), index) }

// nvmlInit initializes lib, turning a missing library (and a go-nvml
// panic) into an error.
func nvmlInit(lib nvmlLib) (err error) {
	defer recoverNVML("nvmlInit", &err)
	ret := lib.Init()
	switch ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("cuda: nvmlInit: %w (libnvidia-ml.so.1: %w)", ErrNoDriver, ret)
	default:
		return fmt.Errorf("cuda: nvmlInit: %w", ret)
	}
}

// recoverNVML turns a panic inside go-nvml (older versions panic when the
// library is missing; mocks panic on unset methods) into an error.
func recoverNVML(call string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("cuda: %s: NVML failed: %v", call, r)
	}
}

func query(lib nvmlLib, index int) (info *Info, err error) {
	if err := nvmlInit(lib); err != nil {
		return nil, err
	}
	defer recoverNVML("NVML query", &err)
	defer lib.Shutdown()

	info = &Info{Index: index}
	var ret nvml.Return
	if info.DriverVersion, ret = lib.SystemGetDriverVersion(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvmlSystemGetDriverVersion: %w", ret)
	}
	if info.CUDADriverVersion, ret = lib.SystemGetCudaDriverVersion(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvmlSystemGetCudaDriverVersion: %w", ret)
	}
	dev, ret := lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvmlDeviceGetHandleByIndex(GPU %d): %w", index, ret)
	}
	if info.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvmlDeviceGetName(GPU %d): %w", index, ret)
	}
	if info.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvmlDeviceGetUUID(GPU %d): %w", index, ret)
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvmlDeviceGetMemoryInfo(GPU %d): %w", index, ret)
	}
	info.TotalBytes, info.UsedBytes, info.FreeBytes = int64(mem.Total), int64(mem.Used), int64(mem.Free)
	procs, ret := dev.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvmlDeviceGetComputeRunningProcesses(GPU %d): %w", index, ret)
	}
	for _, p := range procs {
		used := int64(p.UsedGpuMemory)
		if p.UsedGpuMemory == ^uint64(0) { // NVML_VALUE_NOT_AVAILABLE
			used = -1
		}
		info.Processes = append(info.Processes, Process{PID: int(p.Pid), UsedBytes: used})
	}
	return info, nil
}

// StartMemorySampler reads NVML's used memory of GPU index now and then every
// period until Stop. NVML stays initialized until then.
func StartMemorySampler(index int, every time.Duration) (*MemorySampler, error) {
	if every <= 0 {
		return nil, fmt.Errorf("cuda: memory sampler period %v must be positive", every)
	}
	t := time.NewTicker(every)
	s, err := startMemorySampler(newNVML(), index, t.C, t.Stop)
	if err != nil {
		t.Stop()
	}
	return s, err
}

func startMemorySampler(lib nvmlLib, index int, tick <-chan time.Time, stopTick func()) (_ *MemorySampler, err error) {
	if err := nvmlInit(lib); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lib.Shutdown()
		}
	}()
	defer recoverNVML("nvmlDeviceGetHandleByIndex", &err)
	dev, ret := lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvmlDeviceGetHandleByIndex(GPU %d): %w", index, ret)
	}
	read := func() (used int64, err error) {
		defer recoverNVML("nvmlDeviceGetMemoryInfo", &err)
		mem, ret := dev.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return 0, fmt.Errorf("cuda: nvmlDeviceGetMemoryInfo(GPU %d): %w", index, ret)
		}
		return int64(mem.Used), nil
	}
	shutdown := func() error {
		if ret := lib.Shutdown(); ret != nvml.SUCCESS {
			return fmt.Errorf("cuda: nvmlShutdown: %w", ret)
		}
		return nil
	}
	return newMemorySampler(read, tick, stopTick, shutdown)
}
