package replay

import (
	"context"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
)

// BenchmarkReplay1M is BenchmarkReplay's generated streams at 1M events:
// short enough to run under cachegrind in seconds while comparing builds.
func BenchmarkReplay1M(b *testing.B) {
	for _, gen := range []struct {
		name string
		src  func(n int64) Source
	}{
		{"generated1M", func(n int64) Source { return newGenSource(n) }},
		{"training1M", func(n int64) Source { return newTrainSource(n) }},
	} {
		for _, cs := range []string{"", "expandable_segments:True"} {
			conf, _ := allocator.ParseConf(cs)
			name := gen.name + "/default"
			if cs != "" {
				name = gen.name + "/expandable"
			}
			b.Run(name, func(b *testing.B) {
				const n = 1_000_000
				b.ReportAllocs()
				for b.Loop() {
					res, err := Run(context.Background(), gen.src(n), Options{Conf: conf, TotalMemory: 1 << 40}, nil)
					if err != nil {
						b.Fatal(err)
					}
					if res.Devices[0].Events != n {
						b.Fatalf("replayed %d events, want %d", res.Devices[0].Events, n)
					}
				}
				b.ReportMetric(float64(int64(b.N)*n)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
