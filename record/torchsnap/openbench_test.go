package torchsnap

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkOpen decodes through Open, the sequential decoder with its
// events spilled (what an import of a file up to 21 MiB runs), into a
// spill in a temporary directory that is dropped after each round. Inputs:
// the largest snapshot in testdata, a real-shaped one of 110,000 entries
// (writeRealShaped: 8.3 MB; real10 has 108,990 in 9.6) and
// TORCHSNAP_BENCH_FILE if set (a
// real snapshot or a prefix of one). It reports ns/entry (trace entries of
// all devices) and ms/MB of input.
func BenchmarkOpen(b *testing.B) {
	paths := []string{filepath.Join("..", "..", "testdata", "snapshots", "mlp_train__wrap1500.pickle"), "realshaped"}
	if path := os.Getenv("TORCHSNAP_BENCH_FILE"); path != "" {
		paths = append(paths, path)
	}
	for _, path := range paths {
		b.Run(name(path), func(b *testing.B) {
			if path == "realshaped" {
				path = writeRealShapedFile(b, filepath.Join(b.TempDir(), "realshaped.pickle"), 110_000)
			}
			st, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			b.SetBytes(st.Size())
			b.ReportAllocs()
			entries := int64(0)
			for b.Loop() {
				s, err := Open(path, dir)
				if err != nil {
					b.Fatal(err)
				}
				entries = 0
				for _, d := range s.Devices {
					entries += d.Len()
				}
				s.Close()
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns/float64(entries), "ns/entry")
			b.ReportMetric(ns/1e6/(float64(st.Size())/1e6), "ms/MB")
		})
	}
}

// writeRealShapedFile writes writeRealShaped's snapshot of n entries to path.
func writeRealShapedFile(b *testing.B, path string, n int) string {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := writeRealShaped(f, n); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}
