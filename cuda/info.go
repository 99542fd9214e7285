package cuda

// Info describes one GPU as NVML reports it (see Query).
type Info struct {
	Index int    // NVML device index
	Name  string // e.g. "NVIDIA H100 80GB HBM3"
	UUID  string // e.g. "GPU-5c6f…"

	// Memory as NVML sees it. UsedBytes counts every process's memory,
	// CUDA contexts included (several hundred MiB each), which no caching
	// allocator counts: compare it with reserved bytes only after
	// subtracting the baseline of an idle context.
	TotalBytes int64
	UsedBytes  int64
	FreeBytes  int64

	DriverVersion     string // kernel driver, e.g. "550.54.15"
	CUDADriverVersion int    // CUDA version the driver supports, e.g. 12040 for 12.4

	Processes []Process // compute processes on this GPU
}

// Process is one compute process on a GPU.
type Process struct {
	PID       int
	UsedBytes int64 // -1 where NVML cannot tell (some containers, MIG)
}
