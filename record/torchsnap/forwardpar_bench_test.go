package torchsnap

import (
	"os"
	"testing"

	"github.com/tracer-dev/tracer/internal/cputime"
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
	c0 := cputime.Process()
	b.ResetTimer()
	for range b.N {
		if _, _, ok := d.parallelStart(); !ok {
			b.Fatal("parallelStart declined")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*n), "ns/event")
	b.ReportMetric(float64((cputime.Process()-c0).Nanoseconds())/float64(int64(b.N)*n), "cpu-ns/event")
}

// BenchmarkFollowedStart derives the start state of the file named by
// TORCHSNAP_BENCH_FILE (skipped if unset) from what its Forward followed
// as a spilled import decoded it (OpenFollowed): mergeStart with one share,
// whose lookups of the end state's blocks mergeFind spreads over
// GOMAXPROCS goroutines (-cpu). It reports the wall and the process's CPU
// per end-state block.
func BenchmarkFollowedStart(b *testing.B) {
	path := os.Getenv("TORCHSNAP_BENCH_FILE")
	if path == "" {
		b.Skip("TORCHSNAP_BENCH_FILE not set")
	}
	var f Forward
	s, err := OpenFollowed(path, b.TempDir(), f.Add)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := s.Devices[0]
	if !f.Covers(d) {
		b.Skip("the follower does not cover the file's device")
	}
	blocks := 0
	for j := range d.Segments {
		blocks += len(d.Segments[j].Blocks)
	}
	c0 := cputime.Process()
	b.ResetTimer()
	for range b.N {
		f.startState(d)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*max(1, blocks)), "ns/block")
	b.ReportMetric(float64((cputime.Process()-c0).Nanoseconds())/float64(b.N*max(1, blocks)), "cpu-ns/block")
}
