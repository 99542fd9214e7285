package tune

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/record"
)

// benchDir holds benchTrace's trace; TestMain removes it.
var benchDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchTrace records, once per test binary, a training loop on the
// simulated device: 122 allocations a step of sizes from 40 KB to 37 MB,
// each with its free_requested and free_completed, 2,732 steps: 1M events. TRACER_TUNE_STEPS changes the step count.
var benchTrace = sync.OnceValues(func() (string, error) {
	steps := 2732
	if s := os.Getenv("TRACER_TUNE_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return "", fmt.Errorf("TRACER_TUNE_STEPS: %v", err)
		}
		steps = n
	}
	src := fmt.Sprintf(`description a training loop of small, medium and large tensors
alloc weights 64MiB count=8
repeat %d
  alloc act 3MB count=20
  alloc small 40000 count=40
  alloc logits 8MB
  alloc big 37MB count=2
  alloc grad 1MiB count=20
  alloc mid 700KB count=39
  free act reverse
  free small
  free logits
  free big
  free grad
  free mid
end
`, steps)
	dir, err := os.MkdirTemp("", "tracer-tune-bench-")
	if err != nil {
		return "", err
	}
	benchDir = dir
	out := filepath.Join(dir, "train.arrows")
	if err := record.RecordWorkloadSim(context.Background(), "train.workload", []byte(src), out); err != nil {
		return "", err
	}
	return out, nil
})

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// benchSettings are 50 settings: PyTorch's defaults, every knob alone, and
// expandable segments with each other knob's values.
func benchSettings(limit int64) []Setting {
	sp := newSpace(allocator.DefaultConf())
	pts := append([]point{{}}, sp.singles(true)...)
	for _, p := range sp.singles(true) {
		if len(pts) == 50 {
			break
		}
		if q := p.with(0, 1); p[0] == 0 && sp.valid(q) {
			pts = append(pts, q)
		}
	}
	sets := make([]Setting, len(pts))
	for i, p := range pts {
		sets[i] = Setting{Conf: sp.conf(p), Limit: -1}
		if p[3] != 0 { // garbage collection acts under a limit only
			sets[i].Limit = limit
		}
	}
	return sets
}

// BenchmarkEvaluate50 replays a 1M-event trace under 50 settings, as one
// stage of tracer tune does: the trace is decoded once and feeds the 50
// replays, which run on every core (GOMAXPROCS).
func BenchmarkEvaluate50(b *testing.B) {
	path, err := benchTrace()
	if err != nil {
		b.Fatal(err)
	}
	in, err := pipeline.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	sets := benchSettings(2 << 30)
	if len(sets) != 50 {
		b.Fatalf("%d settings", len(sets))
	}
	var cands []Candidate
	b.ReportAllocs()
	cpu0 := cpuSeconds()
	b.ResetTimer()
	for range b.N {
		if cands, err = Evaluate(context.Background(), in, sets); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// CPU time, beside wall time: on a shared machine the wall time is the
	// other processes' too; CPU seconds / cores bounds it on idle cores.
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/search")
	events := cands[0].Devices[0].Stats.Allocation[0].Allocated * 3 // alloc, free_requested, free_completed
	Rank(Reserved, cands)
	b.ReportMetric(float64(len(sets)), "settings")
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/search")
	b.ReportMetric(float64(int64(b.N)*events*int64(len(sets)))/b.Elapsed().Seconds()/1e6, "Mevents/s")
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
	b.ReportMetric(float64(cands[0].PeakReservedBytes)/(1<<20), "best-peak-MiB")
}

// BenchmarkSearch is tracer tune's search on the same trace: the stages it
// takes and the settings it tries depend on the trace.
func BenchmarkSearch(b *testing.B) {
	path, err := benchTrace()
	if err != nil {
		b.Fatal(err)
	}
	in, err := pipeline.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	var rep *Report
	b.ReportAllocs()
	cpu0 := cpuSeconds()
	b.ResetTimer()
	for range b.N {
		if rep, err = Search(context.Background(), in, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/search")
	b.ReportMetric(float64(len(rep.Ranked)), "settings")
	b.ReportMetric(float64(rep.Passes), "passes")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/search")
	b.ReportMetric(float64(rep.Best().PeakReservedBytes)/(1<<20), "best-peak-MiB")
}
