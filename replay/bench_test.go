package replay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// genSource generates a deterministic request stream of n events: allocs and
// synchronous frees (free_requested + free_completed) of a mix of small,
// medium and large sizes over two streams, with the live set hovering around
// a few thousand blocks. It allocates nothing per event.
//
// It is deliberately a stress case, not a training loop: sizes are uniform up
// to 200 MiB and blocks die in random order, so the cache fragments and
// reserves tens of GB. trainSource is the realistic stream.
type genSource struct {
	n, i int64
	x    uint64
	ev   trace.Event // Next's
	live []genBlock  // live blocks, compact so the generator costs little
	// freed is the block of a free_requested whose free_completed is due
	// next (due).
	freed genBlock
	due   bool
	addr  uint64
	buf   []trace.Event // NextBatch's
}

type genBlock struct {
	addr   uint64
	size   int64
	stream uint64
}

func newGenSource(n int64) *genSource {
	return &genSource{n: n, x: 0x9e3779b97f4a7c15, live: make([]genBlock, 0, 8192), addr: 1 << 40,
		ev: trace.Event{Stack: trace.NoStack}}
}

func (g *genSource) rand() uint64 {
	g.x ^= g.x << 13
	g.x ^= g.x >> 7
	g.x ^= g.x << 17
	return g.x
}

func (g *genSource) Next() bool {
	if g.i >= g.n {
		return false
	}
	g.step(&g.ev)
	return true
}

// step writes event g.i into e and advances. It writes only the fields
// that vary (Seq, Kind, Addr, Size, Stream): e's others must hold the
// constant values every event has (Stack NoStack, the rest zero), so that
// the generator's own cost, which BenchmarkReplay counts as replay, stays
// small.
func (g *genSource) step(e *trace.Event) {
	e.Seq = g.i
	g.i++
	if g.due {
		g.due = false
		e.Kind, e.Addr, e.Size, e.Stream = trace.KindFreeCompleted, g.freed.addr, g.freed.size, g.freed.stream
		return
	}
	r := g.rand()
	if len(g.live) > 0 && (len(g.live) > 4000 || r%100 < 45) {
		j := int(g.rand() % uint64(len(g.live)))
		a := g.live[j]
		g.live[j] = g.live[len(g.live)-1]
		g.live = g.live[:len(g.live)-1]
		e.Kind, e.Addr, e.Size, e.Stream = trace.KindFreeRequested, a.addr, a.size, a.stream
		g.freed, g.due = a, true
		return
	}
	var size int64
	switch c := r >> 32 % 100; {
	case c < 70:
		size = int64(g.rand()%(1<<20)) + 1
	case c < 97:
		size = int64(g.rand()%(20<<20)) + 1
	default:
		size = int64(g.rand()%(200<<20)) + 1
	}
	stream := uint64(0)
	if r>>40%10 == 0 {
		stream = 0x1000
	}
	g.addr += 1 << 12
	e.Kind, e.Addr, e.Size, e.Stream = trace.KindAlloc, g.addr, size, stream
	g.live = append(g.live, genBlock{g.addr, size, stream})
}

// NextBatch serves the stream Next serves, trainBatch events at a time,
// written in place (see step).
func (g *genSource) NextBatch() []trace.Event {
	if g.buf == nil {
		g.buf = make([]trace.Event, trainBatch)
		for i := range g.buf {
			g.buf[i].Stack = trace.NoStack
		}
	}
	b := g.buf[:min(int64(len(g.buf)), g.n-g.i)]
	for i := range b {
		g.step(&b[i])
	}
	return b
}

func (g *genSource) Event() *trace.Event { return &g.ev }
func (g *genSource) Err() error          { return nil }

// BenchmarkReplay measures replay throughput in events/s: each real snapshot
// under its recorded settings (with the event-by-event comparison on), and a
// generated 10M-event stream under default and expandable settings.
//
// Three more figures per snapshot show what the comparison and the per-Run
// setup cost: snapshot-model replays it without the comparison (Recorded
// off, so the comparison's bookkeeping and event conversion are skipped),
// snapshot-reuse does so on one Replayer, which reuses the memory of its
// previous replay (the setup without its allocations), and snapshot-warm
// drives its request stream through one warm allocator again and again, as
// BenchmarkDriveSim does (ns/request: a malloc or a free; no setup, no
// trace reading).
func BenchmarkReplay(b *testing.B) {
	for _, name := range snapshotNames(b) {
		s := loadSnapshot(b, name)
		conf, err := allocator.ParseConf(s.conf)
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []struct {
			prefix   string
			recorded bool
		}{{"snapshot/", !isWrap(name)}, {"snapshot-model/", false}} {
			b.Run(mode.prefix+name, func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					if _, err := Run(context.Background(), NewSliceSource(s.events), Options{
						Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit, Recorded: mode.recorded,
					}, nil); err != nil {
						b.Fatal(err)
					}
				}
				reportRates(b, int64(len(s.events)), cpu0)
			})
		}
		b.Run("snapshot-reuse/"+name, func(b *testing.B) {
			var rp Replayer
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := rp.Run(context.Background(), NewSliceSource(s.events), Options{
					Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit,
				}, nil); err != nil {
					b.Fatal(err)
				}
			}
			reportRates(b, int64(len(s.events)), cpu0)
		})
		b.Run("snapshot-warm/"+name, func(b *testing.B) {
			reqs, slots, err := Requests(NewSliceSource(s.events), 0)
			if err != nil {
				b.Fatal(err)
			}
			// No memory limit: the request stream leaves out the
			// recording's empty_cache calls and cross-stream waits, so under
			// a tight limit it could fail where the recording did not.
			a, err := allocator.New(conf, allocator.NewSimDevice(s.total))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Drive(a, reqs, slots); err != nil { // warm the cache
				b.Fatal(err)
			}
			b.ReportAllocs()
			var served time.Duration
			for b.Loop() {
				d, err := Drive(a, reqs, slots)
				if err != nil {
					b.Fatal(err)
				}
				served += d
			}
			n := float64(int64(b.N) * int64(len(reqs)))
			b.ReportMetric(n/served.Seconds(), "requests/s")
			b.ReportMetric(float64(served.Nanoseconds())/n, "ns/request")
		})
	}
	if path := os.Getenv("TRACER_REPLAY_TRACE"); path != "" {
		// A trace that tracer import made of a large real snapshot (e.g.
		// testdata/bench/real_snapshot.py's), read into memory, replayed
		// on a Replayer under its recorded settings as the snapshots above.
		// TRACER_REPLAY_CONF, if set, applies over the recorded settings
		// (as tracer replay --conf does): expandable_segments:True.
		// The events carry their blocks' numbers, as the pipeline's reader
		// gives them (BlockNumbers, on its own goroutine);
		// trace-byaddr replays them without, finding each free's block
		// by address, and trace-number measures the numbering alone.
		evs, meta, conf, total := numberedTrace(b, path)
		// trace-warm is trace-reuse after one replay outside the measure,
		// as torch_replay.py times PyTorch's allocator after a pass that
		// fills its cache: trace-reuse's first replay makes the Replayer's
		// memory (the arena doubled, its pages first touched).
		// trace-annotate-warm is trace-warm under the import's annotation's
		// options (annotateOptions): what the annotation's code adds to
		// the model's, its memory warm.
		for _, m := range []struct {
			name                     string
			numbered, warm, annotate bool
		}{{"trace-reuse/", true, false, false}, {"trace-byaddr/", false, false, false}, {"trace-warm/", true, true, false},
			{"trace-annotate-warm/", true, true, true}} {
			b.Run(m.name+filepath.Base(path), func(b *testing.B) {
				var rp Replayer
				opts := Options{Conf: conf, TotalMemory: total, MemoryLimit: meta.MemoryLimit, Numbered: m.numbered}
				if m.annotate {
					opts.EmptyCacheRows = meta.EmptyCacheRows
					annotateOptions(b, &opts, evs)
				}
				if m.warm {
					if _, err := rp.Run(context.Background(), NewSliceSource(evs), opts, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					if _, err := rp.Run(context.Background(), NewSliceSource(evs), opts, nil); err != nil {
						b.Fatal(err)
					}
				}
				reportRates(b, int64(len(evs)), cpu0)
			})
		}
		// The same replay on a fresh model each time (Run, not a
		// Replayer), as tracer import's annotation makes one, plain and
		// with the annotation's options and its
		// model sized for the trace's peak of live blocks (Blocks):
		// trace-fresh against trace-reuse is what the model's first use
		// of its memory costs, and trace-annotate against trace-fresh
		// what the annotation adds.
		for _, m := range []struct {
			name     string
			annotate bool
		}{{"trace-fresh/", false}, {"trace-annotate/", true}} {
			b.Run(m.name+filepath.Base(path), func(b *testing.B) {
				opts := Options{Conf: conf, TotalMemory: total, MemoryLimit: meta.MemoryLimit, Numbered: true,
					EmptyCacheRows: meta.EmptyCacheRows}
				if m.annotate {
					annotateOptions(b, &opts, evs)
				}
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					if _, err := Run(context.Background(), NewSliceSource(evs), opts, nil); err != nil {
						b.Fatal(err)
					}
				}
				reportRates(b, int64(len(evs)), cpu0)
			})
		}
		b.Run("trace-number/"+filepath.Base(path), func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				var nums BlockNumbers
				for lo := 0; lo < len(evs); lo += 1024 {
					nums.Number(evs[lo:min(lo+1024, len(evs))])
				}
			}
			reportRates(b, int64(len(evs)), cpu0)
		})
		// The numbering in parts (PartNumbers), as the import's reader
		// and the pipeline run it: its wall rate is the stage's.
		for _, parts := range []int{2, 4} {
			b.Run(fmt.Sprintf("trace-number-parts%d/%s", parts, filepath.Base(path)), func(b *testing.B) {
				cpu0 := cpuTime()
				for b.Loop() {
					numberInParts(evs, parts, 1024)
				}
				reportRates(b, int64(len(evs)), cpu0)
			})
		}
	}
	for _, gen := range benchGens {
		for _, cs := range []string{"", "expandable_segments:True"} {
			conf, _ := allocator.ParseConf(cs)
			name := gen.name + "/default"
			if cs != "" {
				name = gen.name + "/expandable"
			}
			b.Run(name, func(b *testing.B) {
				res := replayGenerated(b, conf, gen.n, func() Source { return gen.src(gen.n) })
				b.ReportMetric(float64(res.Devices[0].Stats.ReservedBytes[0].Peak)/(1<<20), "peak-MiB")
			})
			// The same stream generated before the timer starts and replayed
			// from memory, as the snapshot benchmarks replay theirs: the
			// model's own rate, without the generator's share of the figure
			// above (BenchmarkGenerators measures that share alone). The
			// stream takes n×sizeof(trace.Event) bytes, 880 MB at 10M events.
			b.Run(gen.name+"-mem/"+name[len(gen.name)+1:], func(b *testing.B) {
				evs := generate(gen.src(gen.n).(BatchSource), gen.n)
				replayGenerated(b, conf, gen.n, func() Source { return NewSliceSource(evs) })
			})
		}
	}
}

// livePeak is the most blocks live at once in evs, which tracer import
// gives its annotation (Options.Blocks).
// annotateOptions sets the options of tracer import's annotation in
// opts, its model sized for evs' peak of live blocks; it skips b under
// TRACER_REPLAY_CONF, as the annotation replays under the recorded
// settings only.
func annotateOptions(b *testing.B, opts *Options, evs []trace.Event) {
	if os.Getenv("TRACER_REPLAY_CONF") != "" {
		b.Skip("the annotation replays under the recorded settings only")
	}
	opts.Recorded, opts.SkipCompare, opts.Annotate, opts.InferPools = true, true, true, true
	opts.Blocks = livePeak(evs)
	opts.Left = func(ev *trace.Event) { b.Fatalf("the model left the recording at event %d", ev.Seq) }
}

func livePeak(evs []trace.Event) int {
	live, peak := 0, 0
	for i := range evs {
		switch evs[i].Kind {
		case trace.KindAlloc:
			live++
			peak = max(peak, live)
		case trace.KindFreeCompleted:
			live--
		}
	}
	return peak
}

// replayGenerated replays the n events of each src() under conf b.N times,
// checks that all were replayed, reports the rates and returns the last
// result.
func replayGenerated(b *testing.B, conf allocator.Conf, n int64, src func() Source) *Result {
	b.ReportAllocs()
	var res *Result
	cpu0 := cpuTime()
	for b.Loop() {
		var err error
		if res, err = Run(context.Background(), src(), Options{Conf: conf, TotalMemory: 1 << 40}, nil); err != nil {
			b.Fatal(err)
		}
		if res.Devices[0].Events != n {
			b.Fatalf("replayed %d events, want %d", res.Devices[0].Events, n)
		}
	}
	reportRates(b, n, cpu0)
	return res
}

// reportRates reports the events per second of b.N replays of n events
// each, by the wall clock and by the CPU time spent since cpu0.
func reportRates(b *testing.B, n int64, cpu0 time.Duration) {
	b.ReportMetric(float64(int64(b.N)*n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(int64(b.N)*n)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
}

// readTrace reads the events and metadata of the trace at path.
func readTrace(b *testing.B, path string) ([]trace.Event, trace.Meta) {
	rd, err := trace.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	var evs []trace.Event
	for rd.Next() {
		evs = append(evs, *rd.Event())
	}
	if err := rd.Err(); err != nil {
		b.Fatal(err)
	}
	return evs, rd.Meta()
}

// generate collects the n events of src.
func generate(src BatchSource, n int64) []trace.Event {
	evs := make([]trace.Event, 0, n)
	for batch := src.NextBatch(); len(batch) > 0; batch = src.NextBatch() {
		evs = append(evs, batch...)
	}
	return evs
}

// benchGens are the generated streams BenchmarkReplay replays and
// BenchmarkGenerators measures alone: the stress case and the realistic one,
// at 10M events (the target's size) and at 1M, short enough to run under
// cachegrind in seconds while comparing builds.
var benchGens = []struct {
	name string
	n    int64
	src  func(n int64) Source
}{
	{"generated10M", 10_000_000, newGen},
	{"training10M", 10_000_000, newTrain},
	{"generated1M", 1_000_000, newGen},
	{"training1M", 1_000_000, newTrain},
}

func newGen(n int64) Source   { return newGenSource(n) }
func newTrain(n int64) Source { return newTrainSource(n) }

// BenchmarkGenerators measures the generated sources alone, the part of
// BenchmarkReplay's generated figures that is not replay.
func BenchmarkGenerators(b *testing.B) {
	for _, gen := range benchGens {
		b.Run(gen.name, func(b *testing.B) {
			n := gen.n
			cpu0 := cpuTime()
			var sum uint64
			for b.Loop() {
				// As Run reads them: a batch at a time.
				src := gen.src(n).(BatchSource)
				for evs := src.NextBatch(); len(evs) > 0; evs = src.NextBatch() {
					for i := range evs {
						sum += evs[i].Addr
					}
				}
			}
			b.ReportMetric(float64(int64(b.N)*n)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
			if sum == 0 {
				b.Fatal("no events")
			}
		})
	}
}

// cpuTime is the process's user+system CPU time. The benchmarks report
// events per CPU second too, because wall-clock rates on a shared machine
// measure the neighbours as much as the replay.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func isWrap(name string) bool { return len(name) > 4 && name[len(name)-4:] == "1500" }
