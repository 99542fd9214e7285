package record

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/cuda"
)

// Device kinds for OpenTarget.
const (
	DeviceAuto = "auto" // the GPU when one opens, else the simulated device
	DeviceCUDA = "cuda"
	DeviceSim  = "sim"
)

// DefaultSimMemory is the simulated device's size: an 80 GiB H100's worth, so
// the built-in workloads (up to 5 GiB) behave as on the articles' GPUs.
const DefaultSimMemory = 80 << 30

// DefaultSampleEvery is how often NVML's used memory is read during a live
// recording on a GPU. Each read is a few NVML calls (well under a
// millisecond), made off the allocation path.
const DefaultSampleEvery = 50 * time.Millisecond

// Target is the device a live recording allocates from: a GPU through the
// CUDA driver, or the simulated device.
type Target struct {
	Kind    string // DeviceCUDA or DeviceSim
	Dev     allocator.Device
	Name    string // e.g. "NVIDIA H100 80GB HBM3", or "simulated GPU (80.00 GiB)"
	Total   int64  // bytes
	Ordinal int32  // CUDA ordinal, written into every event
	// Fallback says why DeviceAuto chose the simulated device ("" otherwise).
	Fallback string

	nvmlIndex int // NVML's index of the GPU; -1: no sampling
	close     func() error
}

// MaxSimMemory is the largest simulated device a recording takes: 64 PiB,
// the largest block size an allocator.RawEvent holds.
const MaxSimMemory = 1<<56 - 1

// OpenTarget opens the device of kind (DeviceAuto, DeviceCUDA or DeviceSim).
// ordinal is the CUDA device; simTotal the simulated device's bytes
// (DefaultSimMemory when 0). With DeviceCUDA on a machine without a driver
// the error wraps cuda.ErrNoDriver.
func OpenTarget(kind string, ordinal int, simTotal int64) (*Target, error) {
	if simTotal <= 0 {
		simTotal = DefaultSimMemory
	}
	if simTotal > MaxSimMemory {
		return nil, fmt.Errorf("record: a simulated device of %s is larger than a recording holds (at most %s)",
			allocator.FormatSize(simTotal), allocator.FormatSize(MaxSimMemory))
	}
	switch kind {
	case DeviceSim:
		return simTarget(simTotal, int32(ordinal)), nil
	case DeviceCUDA, DeviceAuto:
		d, err := cuda.Open(ordinal)
		if err == nil {
			return &Target{
				Kind: DeviceCUDA, Dev: d, Name: d.Name(), Total: d.TotalBytes(), Ordinal: int32(ordinal),
				nvmlIndex: nvmlIndex(ordinal), close: d.Close,
			}, nil
		}
		if kind == DeviceAuto {
			t := simTarget(simTotal, int32(ordinal))
			t.Fallback = err.Error()
			if errors.Is(err, cuda.ErrNoDriver) {
				t.Fallback = "no CUDA driver on this machine"
			}
			return t, nil
		}
		if errors.Is(err, cuda.ErrNoDriver) {
			return nil, fmt.Errorf("record: no GPU to record on: %w; use --device sim for the simulated device", err)
		}
		return nil, fmt.Errorf("record: open GPU %d: %w", ordinal, err)
	}
	return nil, fmt.Errorf("record: unknown device %q (want %s, %s or %s)", kind, DeviceCUDA, DeviceSim, DeviceAuto)
}

func simTarget(total int64, ordinal int32) *Target {
	return &Target{
		Kind: DeviceSim, Dev: allocator.NewSimDevice(total), Total: total, Ordinal: ordinal,
		Name: "simulated GPU (" + allocator.FormatSize(total) + ")", nvmlIndex: -1,
	}
}

// Close releases the GPU (its memory goes back to the driver with the
// context). Closing a simulated target does nothing.
func (t *Target) Close() error {
	if t.close == nil {
		return nil
	}
	c := t.close
	t.close = nil
	return c()
}

// nvmlIndex maps a CUDA ordinal to NVML's numbering, which ignores
// CUDA_VISIBLE_DEVICES: the ordinal-th entry of that list, by index or by
// UUID. -1 when it cannot tell (then nothing is sampled rather than the
// wrong GPU).
func nvmlIndex(ordinal int) int {
	vis, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	if !ok {
		return ordinal
	}
	list := strings.Split(vis, ",")
	if ordinal >= len(list) {
		return -1
	}
	id := strings.TrimSpace(list[ordinal])
	if n, err := strconv.Atoi(id); err == nil {
		return n
	}
	if strings.HasPrefix(id, "GPU-") {
		for i := 0; i < 64; i++ {
			info, err := cuda.Query(i)
			if err != nil {
				break
			}
			if strings.HasPrefix(info.UUID, id) {
				return i
			}
		}
	}
	return -1
}
