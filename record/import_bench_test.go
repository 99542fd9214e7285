package record

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkImport measures the whole of `tracer import` on one file: decode,
// reconstruction, validation, the model's block-size annotation and the Arrow
// writer. It imports every real snapshot in testdata/snapshots, and the file
// named by TRACER_IMPORT_BENCH if set (a large one, e.g. from
//
//	TORCHSNAP_GEN=/tmp/big.pickle TORCHSNAP_GEN_EVENTS=2500000 go test -run TestSyntheticSnapshot ./record/torchsnap
//
// ). It reports events/s and input MB/s.
func BenchmarkImport(b *testing.B) {
	for _, in := range benchSnapshots(b) {
		b.Run(snapshotName(in), func(b *testing.B) {
			st, err := os.Stat(in)
			if err != nil {
				b.Fatal(err)
			}
			out := filepath.Join(b.TempDir(), "out.arrows")
			b.SetBytes(st.Size())
			b.ReportAllocs()
			var events int64
			for i := 0; i < b.N; i++ {
				// To a path that is free, as a first import's is: the
				// replacement of an earlier output (its pages freed as it
				// is removed) is not the import's work.
				b.StopTimer()
				if err := os.Remove(out); err != nil && !os.IsNotExist(err) {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := importOne(context.Background(), in, out, ImportOptions{})
				if err != nil {
					b.Fatal(err)
				}
				events += res.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// benchSnapshots returns the import benchmarks' inputs: every real snapshot
// in testdata/snapshots, and the file named by TRACER_IMPORT_BENCH if set.
func benchSnapshots(b *testing.B) []string {
	ins, err := filepath.Glob("../testdata/snapshots/*.pickle")
	if err != nil || len(ins) == 0 {
		b.Fatalf("no snapshots in ../testdata/snapshots (%v)", err)
	}
	if p := os.Getenv("TRACER_IMPORT_BENCH"); p != "" {
		ins = append(ins, p)
	}
	return ins
}

// snapshotName is a snapshot file's name without its folder and extension.
func snapshotName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}
