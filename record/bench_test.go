package record

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// benchWorkload is a steady churn of small and large blocks (no growth), so
// every iteration costs the same: 220,000 allocations and frees per run.
const benchWorkload = `description benchmark churn
repeat 1000
  alloc a 516 count=100
  alloc b 2MiB+1 count=10
  free a
  free b reverse
end
`

// BenchmarkRecord measures a live recording on the simulated device: the
// allocator serving the workload alone ("bare"), with every event stamped
// and written to an Arrow stream in memory ("writer"), and to an in-place
// file with its flushes ("file"). ns/event of writer and file against bare is
// what recording costs; on a GPU, cudaMalloc and the driver add to the bare
// cost, so the ratio there is lower.
func BenchmarkRecord(b *testing.B) {
	w, err := ParseWorkload("bench.workload", []byte(benchWorkload))
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"bare", "writer", "file"} {
		b.Run(mode, func(b *testing.B) {
			var events int64
			for i := 0; i < b.N; i++ {
				tg := simTarget(DefaultSimMemory, 0)
				a, err := allocator.New(allocator.DefaultConf(), tg.Dev)
				if err != nil {
					b.Fatal(err)
				}
				opts := &Options{Workload: w, Target: tg, Out: filepath.Join(b.TempDir(), "bench.arrows")}
				switch mode {
				case "bare":
					var n int64
					a.SetObserver(allocator.ObserverFunc(func(*allocator.Event) { n++ }))
					if err := newExecutor(context.Background(), w, a).run(); err != nil {
						b.Fatal(err)
					}
					events += n
					continue
				case "writer":
					res, err := recordTo(context.Background(), opts, a, trace.NewWriter(io.Discard, trace.Meta{}, trace.WriterOptions{BatchRows: 1 << 30}))
					if err != nil {
						b.Fatal(err)
					}
					events += res.Events
				case "file":
					res, err := Record(context.Background(), *opts)
					if err != nil {
						b.Fatal(err)
					}
					events += res.Events
				}
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
		})
	}
}
