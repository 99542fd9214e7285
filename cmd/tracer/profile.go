package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfile starts the profiles named by the hidden environment
// variables TRACER_CPUPROFILE (a CPU profile of the whole command) and
// TRACER_MEMPROFILE (the heap's allocations, written as the command ends),
// for measuring a command as the user runs it. The returned function stops
// them; a profile that cannot be written is said on stderr, and the
// command runs on.
func startProfile(stderr io.Writer) (stop func()) {
	cpu, mem := os.Getenv("TRACER_CPUPROFILE"), os.Getenv("TRACER_MEMPROFILE")
	var f *os.File
	if cpu != "" {
		var err error
		if f, err = os.Create(cpu); err != nil {
			fmt.Fprintf(stderr, "tracer: TRACER_CPUPROFILE: %v\n", err)
		} else if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "tracer: TRACER_CPUPROFILE: %v\n", err)
			f.Close()
			f = nil
		}
	}
	if mem != "" {
		runtime.MemProfileRate = 64 << 10
	}
	return func() {
		if f != nil {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintf(stderr, "tracer: TRACER_CPUPROFILE: %v\n", err)
			}
		}
		if mem != "" {
			if err := writeHeapProfile(mem); err != nil {
				fmt.Fprintf(stderr, "tracer: TRACER_MEMPROFILE: %v\n", err)
			}
		}
	}
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
