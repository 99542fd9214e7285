package record

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/internal/cputime"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// benchWorkload is a steady churn of small and large blocks (no growth), so
// every iteration costs the same: 3.3 million events per run (a few hundred
// ms), long enough that what a recording costs once (creating the file,
// allocating its buffers, the last sync) is not mistaken for a per-event
// cost.
const benchWorkload = `description benchmark churn
repeat 10000
  alloc a 516 count=100
  alloc b 2MiB+1 count=10
  free a
  free b reverse
end
`

// BenchmarkRecord measures a live recording on the simulated device:
//
//   - bare: the allocator serving the workload alone, nothing observed (the
//     events are counted once, beforehand: every run makes the same);
//   - writer: recorded with every event stamped and encoded as an Arrow
//     stream in the default bounded batches, into a sink that copies the
//     bytes as a write to a pipe or the page cache would, but keeps none
//     (the cost of recording without the file system's);
//   - file: what `tracer record` does (Record: in place, a synced batch per
//     64K events or per second).
//
// Besides ns/op it reports ns/event and events/s and, for writer and file,
// the ns/event of a bare run made beside each recorded one (timer stopped,
// so both see the same machine) and the overhead of recording against it, in
// percent. Elapsed time is what the target is about; cpu-ns/event is the
// process's CPU time per event (getrusage: every thread, the encoder's
// included), what recording costs a machine without a spare core. On a GPU,
// cudaMalloc and the driver add to the bare cost, so the overhead there is
// lower.
//
// The rest splits a run in two, on Linux: the allocator's part, up to its
// last event, and the recording's tail after it (handing over the last
// events, writing them, closing and syncing the file), which the elapsed
// time includes. thread-ns/event is the CPU time of the allocator's thread
// until its last event, per event: what the recorded program pays on its own
// thread (the hot path, and handing chunks over), against the same for the
// bare run beside it (thread-overhead-%); run-ns/event is the elapsed time
// until the last event (it adds to thread-ns/event the allocator's waits for
// the encoder, if any, and preemption); tail-ms is the tail's elapsed time,
// per run.
func BenchmarkRecord(b *testing.B) {
	w, err := ParseWorkload("bench.workload", []byte(benchWorkload))
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"bare", "writer", "file"} {
		b.Run(mode, func(b *testing.B) {
			runtime.LockOSThread() // for cputime.Thread
			defer runtime.UnlockOSThread()
			dir := b.TempDir()
			var events, bareEvents int64
			var bareTime, bareThread, cpu, thread, run, tail time.Duration
			waits := 0
			for i := 0; i < b.N; i++ {
				if mode == "bare" {
					c0, t0 := cputime.Process(), cputime.Thread()
					n, _ := benchBare(b, w)
					thread += cputime.Thread() - t0
					cpu += cputime.Process() - c0
					events += n
					continue
				}
				b.StopTimer()
				t0 := cputime.Thread()
				n, d := benchBare(b, w)
				bareThread += cputime.Thread() - t0
				bareEvents += n
				bareTime += d
				out := filepath.Join(dir, "bench.arrows")
				os.Remove(out)
				var start, ran time.Time
				benchPhase = func(phase string, r *recorder) {
					switch phase {
					case "run":
						ran = time.Now()
						thread += cputime.Thread() - t0
						waits += r.enc.waits
					case "close":
						run += ran.Sub(start)
						tail += time.Since(ran)
					}
				}
				b.StartTimer()
				c0 := cputime.Process()
				start, t0 = time.Now(), cputime.Thread()
				events += benchRecord(b, w, mode, out)
				cpu += cputime.Process() - c0
				benchPhase = nil
			}
			perEvent := func(d time.Duration, n int64) float64 { return float64(d.Nanoseconds()) / float64(n) }
			nsPerEvent := perEvent(b.Elapsed(), events)
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(nsPerEvent, "ns/event")
			b.ReportMetric(perEvent(cpu, events), "cpu-ns/event")
			if thread > 0 {
				b.ReportMetric(perEvent(thread, events), "thread-ns/event")
			}
			if bareEvents > 0 {
				bare := perEvent(bareTime, bareEvents)
				b.ReportMetric(bare, "bare-ns/event")
				b.ReportMetric(100*(nsPerEvent/bare-1), "overhead-%")
				b.ReportMetric(perEvent(run, events), "run-ns/event")
				b.ReportMetric(tail.Seconds()*1000/float64(b.N), "tail-ms")
				b.ReportMetric(float64(waits)/float64(b.N), "waits/run")
				if bareThread > 0 {
					b.ReportMetric(100*(perEvent(thread, events)/perEvent(bareThread, bareEvents)-1), "thread-overhead-%")
				}
			}
		})
	}
}

// benchBare runs w on a fresh allocator with nothing observed and returns
// the events it emits (counted once, in a run of its own: every run makes
// the same) and the time it took.
func benchBare(b *testing.B, w *Workload) (int64, time.Duration) {
	if benchEvents[w] == 0 {
		a := benchAllocator(b)
		var n int64
		a.SetObserver(allocator.ObserverFunc(func(*allocator.Event) { n++ }))
		if err := newExecutor(context.Background(), w, a).run(); err != nil {
			b.Fatal(err)
		}
		benchEvents[w] = n
	}
	start := time.Now()
	if err := newExecutor(context.Background(), w, benchAllocator(b)).run(); err != nil {
		b.Fatal(err)
	}
	return benchEvents[w], time.Since(start)
}

// benchEvents is the number of events each workload emits, as benchBare
// counted them.
var benchEvents = map[*Workload]int64{}

func benchAllocator(b *testing.B) *allocator.Allocator {
	a, err := allocator.New(allocator.DefaultConf(), simTarget(DefaultSimMemory, 0).Dev)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// benchRecord records w to out as mode says and returns the events recorded.
func benchRecord(b *testing.B, w *Workload, mode, out string) int64 {
	tg := simTarget(DefaultSimMemory, 0)
	opts := &Options{Workload: w, Target: tg, Out: out}
	var res *Result
	var err error
	switch mode {
	case "writer":
		a, aerr := allocator.New(allocator.DefaultConf(), tg.Dev)
		if aerr != nil {
			b.Fatal(aerr)
		}
		res, err = recordTo(context.Background(), opts, a, trace.NewWriter(&copySink{}, recordMeta(opts, a), trace.WriterOptions{}))
	case "file":
		res, err = Record(context.Background(), *opts)
	}
	if err != nil {
		b.Fatal(err)
	}
	return res.Events
}

// copySink copies what is written into a reused buffer, as a write(2) to a
// pipe or the page cache copies it, and keeps nothing.
type copySink struct{ buf []byte }

func (s *copySink) Write(p []byte) (int, error) {
	if len(p) > len(s.buf) {
		s.buf = make([]byte, len(p))
	}
	return copy(s.buf, p), nil
}
