package replay

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/cputime"
	"github.com/tracer-dev/tracer/trace"
)

// BenchmarkModelStage splits what the command's model stage (tracer
// replay's, pipeline's) costs beyond the model alone, on the trace that
// TRACER_REPLAY_TRACE names, under its recorded settings (and
// TRACER_REPLAY_CONF's, as BenchmarkReplay's trace-reuse), one step at a
// time: alone (a reused Replayer, the events numbered, nothing observed),
// fresh (a new Run: its arrays grow from empty, touching fresh memory),
// compare (and the event-by-event comparison with the recording), observe
// (and a SlotObserver that takes every emitted event, as the analysis
// stage's batches do), and batches (and the events served as the
// pipeline serves them, 4,096 at a time). Each reports CPU ns/event,
// split into user and system time, and minor page faults per 1,000
// events; run it at -cpu 1. Then, with the CPU of the Run's thread alone
// (thread-ns/event): reuse (the model alone, as BenchmarkReplay's
// trace-reuse: a Replayer's memory reused, nothing observed or compared)
// and, as the command runs it, prepared-alone (a
// Replayer prepared and faulted in for the trace's live blocks before
// each Run), prepared (and the comparison), slots and slots-whatif (with
// and without the comparison, the events handed to a SlotObserver one by
// one, as the analysis's batches took them before the hand-off), handoff (and an EmittedObserver taking
// the events as the model writes them, as the analysis's hand-off does)
// and handoff-whatif (no comparison, as a replay under other settings).
func BenchmarkModelStage(b *testing.B) {
	path := os.Getenv("TRACER_REPLAY_TRACE")
	if path == "" {
		b.Skip("TRACER_REPLAY_TRACE names no trace")
	}
	evs, meta, conf, total := numberedTrace(b, path)
	opts := Options{Conf: conf, TotalMemory: total, MemoryLimit: meta.MemoryLimit, Numbered: true}
	var rp Replayer
	steps := []struct {
		name    string
		fresh   bool
		compare bool
		observe bool
		batches bool
	}{
		{name: "alone"},
		{name: "fresh", fresh: true},
		{name: "compare", fresh: true, compare: true},
		{name: "observe", fresh: true, compare: true, observe: true},
		{name: "batches", fresh: true, compare: true, observe: true, batches: true},
	}
	for _, s := range steps {
		b.Run(s.name+"/"+filepath.Base(path), func(b *testing.B) {
			o := opts
			o.Recorded = s.compare
			u0, s0, f0 := rusageSplit()
			for b.Loop() {
				var src Source = NewSliceSource(evs)
				if s.batches {
					src = &chunkSource{evs: evs, n: 4096}
				}
				var obs Observer
				if s.observe {
					obs = &discardSlots{buf: make([]trace.Event, 4096)}
				}
				run := Run
				if !s.fresh {
					run = rp.Run
				}
				res, err := run(context.Background(), src, o, obs)
				if err != nil {
					b.Fatal(err)
				}
				if s.compare && res.Devices[0].NumMismatches != 0 {
					b.Fatalf("%d mismatches", res.Devices[0].NumMismatches)
				}
			}
			u1, s1, f1 := rusageSplit()
			n := float64(b.N) * float64(len(evs))
			b.ReportMetric(float64(u1-u0+s1-s0)/n, "cpu-ns/event")
			b.ReportMetric(float64(u1-u0)/n, "user-ns/event")
			b.ReportMetric(float64(s1-s0)/n, "sys-ns/event")
			b.ReportMetric(float64(f1-f0)*1000/n, "faults/kevent")
		})
	}
	live := maxLive(evs)
	for _, s := range []struct {
		name             string
		handoff, compare bool
		reuse, slots     bool
	}{{"reuse", false, false, true, false}, {"prepared-alone", false, false, false, false}, {"prepared", false, true, false, false},
		{"slots", false, true, false, true}, {"slots-whatif", false, false, false, true},
		{"handoff", true, true, false, false}, {"handoff-whatif", true, false, false, false}} {
		b.Run(s.name+"/"+filepath.Base(path), func(b *testing.B) {
			o := opts
			o.Recorded = s.compare
			var cpu time.Duration
			var faults int64
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var obs Observer
			switch {
			case s.handoff:
				obs = new(discardEmitted)
			case s.slots:
				obs = &discardSlots{buf: make([]trace.Event, 4096)}
			}
			var reused Replayer
			for b.Loop() {
				var rp Replayer
				if s.reuse {
					// Warm: its first Run's memory, as trace-reuse's.
					if _, err := reused.Run(context.Background(), NewSliceSource(evs), o, nil); err != nil {
						b.Fatal(err)
					}
				} else if err := rp.Prepare(Options{Conf: o.Conf, TotalMemory: o.TotalMemory, MemoryLimit: o.MemoryLimit, Blocks: live}); err != nil {
					b.Fatal(err)
				}
				rp.Prefault(1)
				run := rp.Run
				if s.reuse {
					run = reused.Run
				}
				c0, f0 := cputime.Thread(), cputime.ThreadFaults()
				res, err := run(context.Background(), &chunkSource{evs: evs, n: 4096}, o, obs)
				cpu += cputime.Thread() - c0
				faults += cputime.ThreadFaults() - f0
				if err != nil {
					b.Fatal(err)
				}
				if s.compare && res.Devices[0].NumMismatches != 0 {
					b.Fatalf("%d mismatches", res.Devices[0].NumMismatches)
				}
			}
			n := float64(b.N) * float64(len(evs))
			b.ReportMetric(float64(cpu)/n, "thread-ns/event")
			b.ReportMetric(float64(faults)*1000/n, "faults/kevent")
		})
	}
}

// maxLive is the most blocks live at once in evs (numbered: the greatest
// number), as tracer replay's guess would make room for.
func maxLive(evs []trace.Event) int {
	n := int32(0)
	for i := range evs {
		n = max(n, evs[i].Ref)
	}
	return int(n) + 1
}

// discardEmitted is an EmittedObserver that drops what it is handed.
type discardEmitted struct{ e Emitted }

func (d *discardEmitted) Event(*trace.Event) {}

func (d *discardEmitted) Emitted(e *Emitted, more bool) *Emitted { return &d.e }

// numberedTrace reads the trace at path, numbered (BlockNumbers), and
// returns its events and metadata, the settings to replay it under (its
// recorded ones, with TRACER_REPLAY_CONF applied over them if set, as
// tracer replay --conf does) and its device's memory (1 TiB if unknown).
func numberedTrace(b *testing.B, path string) ([]trace.Event, trace.Meta, allocator.Conf, int64) {
	evs, meta := readTrace(b, path)
	cs := meta.AllocConf
	if extra := os.Getenv("TRACER_REPLAY_CONF"); extra != "" {
		cs = strings.TrimPrefix(cs+","+extra, ",")
	}
	conf, err := allocator.ParseConf(cs)
	if err != nil {
		b.Fatal(err)
	}
	total := meta.DeviceTotal
	if total == 0 {
		total = 1 << 40
	}
	var nums BlockNumbers
	nums.Number(evs)
	return evs, meta, conf, total
}

// rusageSplit returns the process's user and system CPU time and its
// minor page faults so far.
func rusageSplit() (user, sys time.Duration, faults int64) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), ru.Minflt
}

// chunkSource serves evs n at a time, as the pipeline's reader serves its
// batches.
type chunkSource struct {
	evs []trace.Event
	n   int
	cur trace.Event
}

func (c *chunkSource) NextBatch() []trace.Event {
	b := c.evs[:min(c.n, len(c.evs))]
	c.evs = c.evs[len(b):]
	return b
}

func (c *chunkSource) Next() bool {
	if len(c.evs) == 0 {
		return false
	}
	c.cur, c.evs = c.evs[0], c.evs[1:]
	return true
}

func (c *chunkSource) Event() *trace.Event { return &c.cur }
func (c *chunkSource) Err() error          { return nil }

// discardSlots is a SlotObserver that takes every event into a batch and
// drops the batch when it is full, as the analysis stage's hand-off does
// but for the analysis.
type discardSlots struct {
	buf []trace.Event
	n   int
}

func (d *discardSlots) Slot() *trace.Event { return &d.buf[d.n] }

func (d *discardSlots) Event(ev *trace.Event) {
	if ev != &d.buf[d.n] {
		d.buf[d.n] = *ev
	}
	if d.n++; d.n == len(d.buf) {
		d.n = 0
	}
}
