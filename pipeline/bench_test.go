package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/internal/cputime"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// benchTrace records, once per test binary, a long training loop on the
// simulated device: about 243 events per step (81 allocations with their
// free_requested and free_completed), 41,000 steps by default, so ~10M
// events. TRACER_BENCH_STEPS changes the step count; TRACER_BENCH_TRACE
// names a trace to use instead, made by an earlier run if it exists (it is
// kept).
var benchTrace = sync.OnceValues(func() (string, error) {
	keep := os.Getenv("TRACER_BENCH_TRACE")
	if keep != "" {
		if _, err := os.Stat(keep); err == nil {
			return keep, nil
		}
	}
	steps := 41000
	if s := os.Getenv("TRACER_BENCH_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return "", fmt.Errorf("TRACER_BENCH_STEPS: %v", err)
		}
		steps = n
	}
	src := fmt.Sprintf(`description a training loop of small and medium tensors
alloc weights 64MiB count=8
repeat %d
  alloc act 3MB count=20
  alloc small 40000 count=40
  alloc logits 8MB
  alloc grad 1MiB count=20
  free act reverse
  free small
  free logits
  free grad
end
`, steps)
	dir, err := os.MkdirTemp("", "tracer-bench-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "train.arrows")
	if keep != "" {
		out = keep
	}
	if err := record.RecordWorkloadSim(context.Background(), "train.workload", []byte(src), out); err != nil {
		return "", err
	}
	return out, nil
})

// BenchmarkReplayAnalyze measures what `tracer replay --json` does per
// trace: read it, replay it on the model and summarize the replayed events
// as far as the command prints them (analysis.Options.FragmentationOnly),
// under the recorded settings (with the event-by-event comparison), and a
// what-if under expandable_segments:True, which replays the recorded
// settings beside it from one reading (ReplayEach, the recorded one not
// compared). events/s counts the trace's events once per op.
func BenchmarkReplayAnalyze(b *testing.B) {
	path, err := benchTrace()
	if err != nil {
		b.Fatal(err)
	}
	in, err := pipeline.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	base, err := in.RecordedSettings()
	if err != nil {
		b.Fatal(err)
	}
	only := analysis.Options{FragmentationOnly: true}
	for _, c := range []struct {
		name string
		set  pipeline.Settings
	}{
		{"recorded", pipeline.Settings{}},
		{"expandable", pipeline.Settings{Conf: "expandable_segments:True"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			r, err := in.Resolve(c.set)
			if err != nil {
				b.Fatal(err)
			}
			sets, opts := []pipeline.Resolved{r}, []pipeline.Options{{Analysis: only}}
			if r != base {
				sets, opts = append(sets, base), append(opts, pipeline.Options{Analysis: only, SkipCompare: true})
			}
			var events int64
			for b.Loop() {
				runs, err := pipeline.ReplayEach(context.Background(), in, sets, opts)
				if err != nil {
					b.Fatal(err)
				}
				if runs[0].Summaries[0].Peaks.Reserved.Bytes == 0 {
					b.Fatal("no reserved peak")
				}
				events += runs[0].Facts.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
		})
	}
}

// BenchmarkAnalysisStage measures the analysis stage of `tracer replay`
// alone: the replayed events of a trace under its recorded settings,
// collected once, fed to a summarizer (analysis.Options.FragmentationOnly)
// in the batches the command hands on, with its table sized as the
// command sizes it: "numbered", as the command does, the events' blocks
// numbered beforehand (replay.BlockNumbers, outside the timer, as another
// goroutine numbers them in the command), and "hashed", by address, as
// before. TRACER_BENCH_ANALYSIS names the trace (default benchTrace's).
// thread-ns/event is the summarizer's thread's CPU time per event.
func BenchmarkAnalysisStage(b *testing.B) {
	path := os.Getenv("TRACER_BENCH_ANALYSIS")
	if path == "" {
		var err error
		if path, err = benchTrace(); err != nil {
			b.Fatal(err)
		}
	}
	evs, blocks, err := pipeline.ReplayedEvents(path)
	if err != nil {
		b.Fatal(err)
	}
	hashed := slices.Clone(evs)
	var nums replay.BlockNumbers
	nums.Number(evs)
	for _, c := range []struct {
		name     string
		evs      []trace.Event
		numbered bool
	}{{"numbered", evs, true}, {"hashed", hashed, false}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			runtime.LockOSThread() // the thread's CPU time is the summarizer's
			defer runtime.UnlockOSThread()
			cpu0, faults0 := cputime.Thread(), cputime.ThreadFaults()
			for b.Loop() {
				s := analysis.NewSummarizer(analysis.Options{FragmentationOnly: true, Blocks: blocks, Numbered: c.numbered})
				for rest := c.evs; len(rest) > 0; {
					n := min(len(rest), pipeline.BatchRows)
					s.Events(rest[:n])
					rest = rest[n:]
				}
				if s.Finalize().Peaks.Reserved.Bytes == 0 {
					b.Fatal("no reserved peak")
				}
			}
			b.ReportMetric(float64(cputime.Thread()-cpu0)/float64(b.N*len(c.evs)), "thread-ns/event")
			b.ReportMetric(float64(cputime.ThreadFaults()-faults0)/float64(b.N), "faults/op")
		})
	}
}
