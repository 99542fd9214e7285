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
// allocator serves each stream once with nothing recorded (no observer, no
// sink: the allocator alone) and once recorded to a crash-safe trace file
// (the live recorder of `tracer record`), alternately, b.N times each. The
// recorded time (overhead-%) includes the recording's tail (handing over the
// last chunk, writing and syncing it, closing the file), once per recording;
// tail-ms reports it (finish-ms the part before Close),
// overhead-passes-% leaves it out (the cost per event), overhead-p50-%
// compares the median passes, and waits counts the times the allocator
// waited for the encoder.
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
			if _, err := replay.Drive(a, reqs, slots); err != nil { // warm the cache
				b.Fatal(err)
			}
			var perPass int64 // a warm pass's events: every pass makes the same
			a.SetObserver(allocator.ObserverFunc(func(*allocator.Event) { perPass++ }))
			if _, err := replay.Drive(a, reqs, slots); err != nil {
				b.Fatal(err)
			}
			a.SetObserver(nil)

			out := filepath.Join(b.TempDir(), "drive.arrows")
			tw, err := trace.Create(out, trace.Meta{Producer: "BenchmarkRecordDrive"}, trace.WriterOptions{Live: true})
			if err != nil {
				b.Fatal(err)
			}
			r := newRecorder(tw, a, 0, 0, 0)
			var bare, recorded time.Duration
			bareP, recP := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N) // each pass
			pass := func(record bool, sum *time.Duration, each *[]time.Duration) {
				if record {
					a.SetEventSink(r, r.buffer())
				}
				d, err := replay.Drive(a, reqs, slots)
				if err != nil {
					b.Fatal(err)
				}
				if record { // handing r the pass's last events is part of it
					t0 := time.Now()
					a.SetEventSink(nil, nil)
					d += time.Since(t0)
				}
				*sum += d
				*each = append(*each, d)
			}
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					pass(false, &bare, &bareP)
					pass(true, &recorded, &recP)
				} else {
					pass(true, &recorded, &recP)
					pass(false, &bare, &bareP)
				}
			}
			events := perPass * int64(b.N)
			t0 := time.Now()
			r.finish()
			finish := time.Since(t0)
			if err := tw.Close(); err != nil {
				b.Fatal(err)
			}
			tail := time.Since(t0)
			recorded += tail
			got := r.events() // exact once finished
			if got != events {
				b.Fatalf("recorded %d events in %d passes of %d", got, b.N, perPass)
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
			// and every pass without the tail: the cost per event.
			b.ReportMetric(100*(float64(recorded-tail)/float64(bare)-1), "overhead-passes-%")
			b.ReportMetric(float64(tail.Microseconds())/1000, "tail-ms")
			// of which Close (the file's last writes and its fsync) takes
			// the rest after the encoder's last batch (finish-ms).
			b.ReportMetric(float64(finish.Microseconds())/1000, "finish-ms")
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

// BenchmarkSinkFloor splits what recording costs the allocator's thread in
// BenchmarkRecordDrive, on the same streams, on the simulated device, each
// sink pass beside a bare one: "l1" hands the events to a sink that gives
// the same 256-event buffer back every time (the stores stay in L1 and
// nothing else happens: the cost of the allocator's side of the sink
// alone), "ring" to one that cycles through 16 chunks of memory, 4096
// events each, as the recorder's chunks are when the encoder returns them
// in turn (adds the memory traffic of the stores, but no clock reads, no
// encoder).
func BenchmarkSinkFloor(b *testing.B) {
	for _, name := range recordDriveTraces {
		for _, mode := range []struct {
			name         string
			chunks, size int
		}{{"l1", 1, maxClockEvery}, {"ring", 16, chunkEvents}} {
			b.Run(mode.name+"/"+name, func(b *testing.B) {
				reqs, slots := driveRequests(b, name)
				a, err := allocator.New(allocator.DefaultConf(), allocator.NewSimDevice(80<<30))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := replay.Drive(a, reqs, slots); err != nil { // warm the cache
					b.Fatal(err)
				}
				s := &floorSink{mem: make([]allocator.RawEvent, mode.chunks*mode.size), size: mode.size}
				var bare, sunk time.Duration
				for i := 0; i < b.N; i++ {
					d, err := replay.Drive(a, reqs, slots)
					if err != nil {
						b.Fatal(err)
					}
					bare += d
					a.SetEventSink(s, s.next())
					d, err = replay.Drive(a, reqs, slots)
					if err != nil {
						b.Fatal(err)
					}
					a.SetEventSink(nil, nil)
					sunk += d
				}
				if s.events == 0 {
					b.Fatal("the sink got no events")
				}
				n := float64(b.N) * float64(len(reqs))
				b.ReportMetric(float64(bare.Nanoseconds())/n, "bare-ns/req")
				b.ReportMetric(float64(sunk.Nanoseconds())/n, "sink-ns/req")
				b.ReportMetric(100*(float64(sunk)/float64(bare)-1), "overhead-%")
			})
		}
	}
}

// floorSink counts the events and gives out its memory in turn, size
// events at a time, as chunks of the recorder's would be.
type floorSink struct {
	mem    []allocator.RawEvent
	size   int
	at     int // the start of the buffer given last
	events int
}

func (s *floorSink) next() []allocator.RawEvent { return s.mem[s.at : s.at+s.size] }

func (s *floorSink) EventsWritten(n int, _ allocator.PoolID) []allocator.RawEvent {
	s.events += n
	if s.at += s.size; s.at == len(s.mem) {
		s.at = 0
	}
	return s.next()
}
