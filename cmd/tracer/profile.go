package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"

	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/record"
)

// startProfile starts the profiles named by the hidden environment
// variables TRACER_CPUPROFILE (a CPU profile of the whole command) and
// TRACER_MEMPROFILE (the heap's allocations, written as the command ends),
// TRACER_EXECTRACE (Go's execution trace: which goroutine waited for what,
// for `go tool trace`), for measuring a command as the user runs it, and TRACER_STAGES, which
// has each replay and import say on stderr what its stages cost
// (pipeline.OnStages, record.OnImportStage).
// The returned function stops them; a profile that cannot be written is
// said on stderr, and the command runs on.
func startProfile(stderr io.Writer) (stop func()) {
	decoders := func(t pipeline.StageTimes) string {
		if t.Decoded == 0 {
			return ""
		}
		return fmt.Sprintf("; the trace's decoders beside the reader: CPU ms %.1f, record batches %d", float64(t.Decoders.Microseconds())/1e3, t.Decoded)
	}
	cpu, mem := os.Getenv("TRACER_CPUPROFILE"), os.Getenv("TRACER_MEMPROFILE")
	stages := os.Getenv("TRACER_STAGES") != ""
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	began := time.Now()
	if stages {
		var mu sync.Mutex
		pipeline.OnStages = func(t pipeline.StageTimes) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(stderr, "tracer: stages (%s): CPU ms: read %.1f, numbering %.1f, model %.1f, analysis %.1f (its blocks numbered ahead %.1f), finalize %.1f; wall ms %.1f, from %.1f to %.1f; minor faults: the model's thread %d, the analysis's %d%s\n",
				t.Label, ms(t.Read), ms(t.Number), ms(t.Model), ms(t.Analysis), ms(t.AnalysisNumber), ms(t.Finalize), ms(t.Wall),
				ms(time.Since(began)-t.Wall), ms(time.Since(began)), t.ModelFaults, t.AnalysisFaults, decoders(t))
		}
		record.OnImportStage = func(s record.ImportStage) {
			mu.Lock()
			defer mu.Unlock()
			whose, faults := "its goroutine's", fmt.Sprintf("; minor faults %d", s.Faults)
			if s.Alone {
				whose, faults = "the process's", ""
			}
			fmt.Fprintf(stderr, "tracer: import stage (%s) %s: CPU ms %.1f (%s); wall ms from %.1f to %.1f; peak RSS %.1f MiB%s\n",
				s.In, s.Name, ms(s.CPU), whose, ms(s.Start.Sub(began)), ms(s.End.Sub(began)), float64(s.PeakRSS)/(1<<20), faults)
		}
	}
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
	} else {
		// No memory profile is written: sampling one costs a stack walk
		// per 512 KiB allocated and a bucket per stack, whose pages (and
		// the pages of the executable's tables the walks read) count in
		// an import's peak.
		runtime.MemProfileRate = 0
	}
	execTrace := startExecTrace(os.Getenv("TRACER_EXECTRACE"), stderr)
	return func() {
		execTrace()
		if stages {
			pipeline.OnStages = nil
			record.OnImportStage = nil
			fmt.Fprintf(stderr, "tracer: stages: %.1f ms from main to the end\n", ms(time.Since(began)))
		}
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

// startExecTrace starts Go's execution tracer writing to path, if set, and
// returns what stops it and closes the file.
func startExecTrace(path string, stderr io.Writer) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = trace.Start(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "tracer: TRACER_EXECTRACE: %v\n", err)
		return func() {}
	}
	return func() {
		trace.Stop()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "tracer: TRACER_EXECTRACE: %v\n", err)
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
