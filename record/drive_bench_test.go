package record

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/cuda"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// recordDriveTraces are the request streams BenchmarkRecordDrive serves: the
// single-stream snapshots that replay's BenchmarkDriveCUDA and
// testdata/bench/torch_replay.py (PyTorch's own allocator) serve too, so the
// three compare.
var recordDriveTraces = []string{"mlp_train__default", "attention_infer__default", "churn__split64__seed2"}

// BenchmarkRecordDrive measures what recording adds to the allocator serving
// a real request stream, warm, as the cuda issue states its target: the same
// allocator serves each stream once with nothing recorded (an observer that
// counts the events) and once recorded to a crash-safe trace file (the live
// recorder of `tracer record`), alternately, b.N times each. The recorded
// time includes the recording's tail (handing over the last chunk, writing
// and syncing it, closing the file), spread over the passes; tail-ms reports
// it, overhead-p50-% compares the median passes, and waits counts the times
// the allocator waited for the encoder.
//
// On the simulated device by default; TRACER_GPU=1 serves the streams from a
// real GPU through cuda/, where device calls are part of both sides.
func BenchmarkRecordDrive(b *testing.B) {
	newDev := func(b *testing.B) allocator.Device { return allocator.NewSimDevice(80 << 30) }
	if os.Getenv("TRACER_GPU") == "1" {
		dev, err := cuda.Open(0)
		if err != nil {
			b.Fatal(err)
		}
		defer dev.Close()
		newDev = func(*testing.B) allocator.Device { return dev }
	}
	for _, name := range recordDriveTraces {
		b.Run(name, func(b *testing.B) {
			reqs, slots := driveRequests(b, name)
			a, err := allocator.New(allocator.DefaultConf(), newDev(b))
			if err != nil {
				b.Fatal(err)
			}
			defer a.EmptyCache()
			var events int64
			count := allocator.ObserverFunc(func(*allocator.Event) { events++ })
			a.SetObserver(count)
			if _, err := replay.Drive(a, reqs, slots); err != nil { // warm the cache
				b.Fatal(err)
			}
			events = 0

			out := filepath.Join(b.TempDir(), "drive.arrows")
			tw, err := trace.Create(out, trace.Meta{Producer: "BenchmarkRecordDrive"}, trace.WriterOptions{InPlace: true})
			if err != nil {
				b.Fatal(err)
			}
			r := newRecorder(tw, a, 0, 0, 0)
			var bare, recorded time.Duration
			bareP, recP := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N) // each pass
			pass := func(obs allocator.Observer, sum *time.Duration, each *[]time.Duration) {
				a.SetObserver(obs)
				d, err := replay.Drive(a, reqs, slots)
				if err != nil {
					b.Fatal(err)
				}
				*sum += d
				*each = append(*each, d)
			}
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					pass(count, &bare, &bareP)
					pass(r, &recorded, &recP)
				} else {
					pass(r, &recorded, &recP)
					pass(count, &bare, &bareP)
				}
			}
			a.SetObserver(nil)
			got := r.events()
			t0 := time.Now()
			r.finish()
			if err := tw.Close(); err != nil {
				b.Fatal(err)
			}
			tail := time.Since(t0)
			recorded += tail
			if got != events {
				b.Fatalf("recorded %d events, the bare passes emitted %d", got, events)
			}

			n := float64(b.N) * float64(len(reqs))
			b.ReportMetric(float64(bare.Nanoseconds())/n, "bare-ns/req")
			b.ReportMetric(float64(recorded.Nanoseconds())/n, "recorded-ns/req")
			b.ReportMetric(float64(events)/float64(b.N)/float64(len(reqs)), "events/req")
			b.ReportMetric(100*(float64(recorded)/float64(bare)-1), "overhead-%")
			// What the overhead is made of: the median pass (what a pass
			// costs without the tail, and without the passes a busy machine
			// slowed down), the tail (once per run, a few ms, most of it
			// Close's fsync), and the times the allocator waited for the
			// encoder to return a chunk.
			slices.Sort(bareP)
			slices.Sort(recP)
			b.ReportMetric(100*(float64(recP[len(recP)/2])/float64(bareP[len(bareP)/2])-1), "overhead-p50-%")
			b.ReportMetric(float64(tail.Microseconds())/1000, "tail-ms")
			b.ReportMetric(float64(r.enc.waits), "waits")
		})
	}
}

// driveRequests imports a real snapshot and returns its request stream.
func driveRequests(b *testing.B, name string) ([]replay.Request, int) {
	b.Helper()
	out := filepath.Join(b.TempDir(), name+".arrows")
	snap := filepath.Join("..", "testdata", "snapshots", name+".pickle")
	if _, err := ImportSnapshots(context.Background(), []string{snap}, ImportOptions{Out: out}); err != nil {
		b.Fatal(err)
	}
	rd, err := trace.Open(out)
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	reqs, slots, err := replay.Requests(rd, 0)
	if err != nil {
		b.Fatal(err)
	}
	return reqs, slots
}
