package replay_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/cuda"
	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// driveTraces are single-stream snapshots: PyTorch's raw_alloc, the
// yardstick, allocates on the current stream only.
var driveTraces = []string{"mlp_train__default", "attention_infer__default", "churn__split64__seed2"}

func requestsOf(tb testing.TB, name string) ([]replay.Request, int) {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), name+".arrows")
	snap := filepath.Join("..", "testdata", "snapshots", name+".pickle")
	if _, err := record.ImportSnapshots(context.Background(), []string{snap}, record.ImportOptions{Out: out}); err != nil {
		tb.Fatal(err)
	}
	if dir := os.Getenv("TRACER_BENCH_TRACES"); dir != "" {
		// Keep the traces for the PyTorch side of the comparison.
		data, _ := os.ReadFile(out)
		os.WriteFile(filepath.Join(dir, name+".arrows"), data, 0o644)
	}
	rd, err := trace.Open(out)
	if err != nil {
		tb.Fatal(err)
	}
	defer rd.Close()
	reqs, slots, err := replay.Requests(rd, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return reqs, slots
}

func TestDrive(t *testing.T) {
	reqs, slots := requestsOf(t, "mlp_train__default")
	if len(reqs) != 565+562 {
		t.Fatalf("%d requests, want 565 allocs + 562 frees", len(reqs))
	}
	a, err := allocator.New(allocator.DefaultConf(), allocator.NewSimDevice(80<<30))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Drive(a, reqs, slots); err != nil {
		t.Fatal(err)
	}
	st := a.Stats().Map()
	// Every request was served and freed; the cache keeps the recorded run's segments.
	if st["allocation.all.allocated"] != 565 || st["allocated_bytes.all.current"] != 0 || st["segment.all.current"] != 36 {
		t.Errorf("stats after Drive: allocated %d, current %d, segments %d",
			st["allocation.all.allocated"], st["allocated_bytes.all.current"], st["segment.all.current"])
	}
	// A second, warm pass needs no new segment.
	if _, err := replay.Drive(a, reqs, slots); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().Map()["num_device_alloc"]; got != 36 {
		t.Errorf("warm pass made device allocations: %d in all", got)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// benchDrive measures the warm cost per request of our allocator on dev.
func benchDrive(b *testing.B, newDev func() allocator.Device) {
	for _, name := range driveTraces {
		b.Run(name, func(b *testing.B) {
			reqs, slots := requestsOf(b, name)
			a, err := allocator.New(allocator.DefaultConf(), newDev())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := replay.Drive(a, reqs, slots); err != nil { // warm the cache
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := replay.Drive(a, reqs, slots); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(reqs))/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(reqs)), "ns/event")
			a.EmptyCache()
		})
	}
}

func BenchmarkDriveSim(b *testing.B) {
	benchDrive(b, func() allocator.Device { return allocator.NewSimDevice(80 << 30) })
}

// BenchmarkDriveCUDA is the Go side of the comparison with PyTorch's own
// allocator (testdata/bench/torch_replay.py) on the same GPU: run on the GPU
// machine with TRACER_GPU=1.
func BenchmarkDriveCUDA(b *testing.B) {
	if os.Getenv("TRACER_GPU") != "1" {
		b.Skip("set TRACER_GPU=1 on a machine with an NVIDIA GPU")
	}
	dev, err := cuda.Open(0)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	benchDrive(b, func() allocator.Device { return dev })
}
