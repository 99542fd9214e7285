package torchsnap

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// BenchmarkParallelStart derives the start state of the file named by
// TORCHSNAP_BENCH_FILE (skipped if unset), decoded once as an import
// decodes it (ReadFileMappedIn: a file of up to 64 MiB has its records in
// a scratch file), on GOMAXPROCS cores (-cpu); it reports the wall and
// the process's CPU per event.
func BenchmarkParallelStart(b *testing.B) {
	path := os.Getenv("TORCHSNAP_BENCH_FILE")
	if path == "" {
		b.Skip("TORCHSNAP_BENCH_FILE not set")
	}
	s, err := ReadFileMappedIn(path, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := s.Devices[0]
	n := d.Len()
	c0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		if _, _, ok := d.parallelStart(); !ok {
			b.Fatal("parallelStart declined")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*n), "ns/event")
	b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(int64(b.N)*n), "cpu-ns/event")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
