//go:build unix

package cputime

import (
	"runtime"
	"syscall"
	"time"
)

const rusageThread = 1 // RUSAGE_THREAD, Linux only

// Process is the CPU time of the process so far (0 if the kernel does not say).
func Process() time.Duration { return rusage(syscall.RUSAGE_SELF) }

// Thread is the CPU time of the calling thread so far, on Linux (0
// elsewhere); the caller keeps its goroutine on the thread meanwhile.
func Thread() time.Duration {
	if runtime.GOOS != "linux" {
		return 0
	}
	return rusage(rusageThread)
}

// ThreadFaults is the minor page faults of the calling thread so far, on
// Linux (0 elsewhere): a stage's first touches of fresh memory, which its
// CPU time counts without saying so.
func ThreadFaults() int64 {
	if runtime.GOOS != "linux" {
		return 0
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return int64(ru.Minflt)
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
