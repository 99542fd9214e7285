//go:build unix

package record

import (
	"runtime"
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPUTime is the CPU time of the calling thread so far, on Linux (0
// elsewhere); the caller locks its goroutine to its thread.
func threadCPUTime() time.Duration {
	if runtime.GOOS != "linux" {
		return 0
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
