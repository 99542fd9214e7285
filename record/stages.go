package record

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/tracer-dev/tracer/internal/cputime"
	"github.com/tracer-dev/tracer/record/torchsnap"
)

// ImportStage is one stage of an import, measured for OnImportStage: what
// a GPU host's many cores leave as the import's critical path is the
// stages that run alone (decode's serial part, the start state's merge,
// close) and the longest of those side by side (validation, the
// annotation's replay, the writing).
type ImportStage struct {
	In   string // the snapshot
	Name string
	// CPU is the CPU time of the stage's own goroutine, which keeps its
	// thread meanwhile, when Alone is false; when Alone is true, the
	// process's over the stage's span, the goroutines it started
	// included (nothing else runs then).
	CPU        time.Duration
	Alone      bool
	Start, End time.Time
	PeakRSS    int64 // the process's peak resident bytes so far, as the stage ends (Linux; else 0)
	// Faults are the minor page faults of the stage's thread, when Alone
	// is false (Linux; else 0): its first touches of fresh memory, which
	// CPU counts as its own.
	Faults int64
}

// OnImportStage, when set, receives each stage of every import as it ends,
// from the stage's goroutine (calls may come at once). It is for measuring
// the command (TRACER_STAGES), not for use while imports run.
var OnImportStage func(ImportStage)

// stageTimer measures the stages of one import; the zero one, made while
// OnImportStage is nil, measures nothing.
type stageTimer struct {
	in string
	on func(ImportStage)
}

func newStageTimer(in string) stageTimer { return stageTimer{in: in, on: OnImportStage} }

// stageClock is one stage being measured.
type stageClock struct {
	t      *stageTimer
	name   string
	alone  bool
	start  time.Time
	cpu0   time.Duration
	flt0   int64
	locked bool
	// thread: an alone stage that keeps its thread too (aloneOnThread),
	// whose CPU was thread0 at its start.
	thread  bool
	thread0 time.Duration
}

// alone starts a stage that runs with nothing beside it: its CPU is the
// process's.
func (t *stageTimer) alone(name string) stageClock {
	if t.on == nil {
		return stageClock{}
	}
	return stageClock{t: t, name: name, alone: true, start: time.Now(), cpu0: cputime.Process()}
}

// aloneOnThread is alone for a stage whose goroutine keeps its thread
// until end, so that its own CPU can be told from its helpers' (the
// decoder's, up to its first region: decodeParts).
func (t *stageTimer) aloneOnThread(name string) stageClock {
	if t.on == nil {
		return stageClock{}
	}
	runtime.LockOSThread()
	c := t.alone(name)
	c.thread, c.thread0 = true, cputime.Thread()
	return c
}

// beside starts a stage that runs on the calling goroutine beside others:
// its CPU is its thread's, which it keeps until end.
func (t *stageTimer) beside(name string) stageClock {
	if t.on == nil {
		return stageClock{}
	}
	runtime.LockOSThread()
	return stageClock{t: t, name: name, start: time.Now(), cpu0: cputime.Thread(), flt0: cputime.ThreadFaults(), locked: true}
}

// end reports the stage, and returns what it reported (zero if nothing).
func (c *stageClock) end() ImportStage {
	if c.t == nil {
		return ImportStage{}
	}
	s := ImportStage{In: c.t.in, Name: c.name, Alone: c.alone, Start: c.start, End: time.Now(), PeakRSS: peakRSS()}
	if c.alone {
		s.CPU = cputime.Process() - c.cpu0
		if c.thread {
			runtime.UnlockOSThread()
		}
	} else {
		s.CPU = cputime.Thread() - c.cpu0
		s.Faults = cputime.ThreadFaults() - c.flt0
		runtime.UnlockOSThread()
	}
	c.t.on(s)
	c.t = nil
	return s
}

// decodeParts reports the parts of the decode (c, which has ended as
// decode) that the parallel decoder took (spans, within it: region.go) and
// the sequential ones around them, each with the process's CPU, so that
// the part of a large file decoded on one core shows; size is the file's.
// The CPU of the workers that read the segments' blocks ahead (ahead,
// within the first sequential part) is reported after the parts, and,
// where c kept its thread (aloneOnThread), the decoder's own CPU before
// the first region: the head that runs on one core.
func (t *stageTimer) decodeParts(c stageClock, decode ImportStage, spans []torchsnap.RegionSpan, ahead torchsnap.AheadSpan, size int64) {
	if t.on == nil || len(spans) == 0 && ahead.Batches == 0 {
		return
	}
	at, off, cpu := c.start, int64(0), c.cpu0
	part := func(name string, end int64, stop time.Time, stopCPU time.Duration) {
		t.on(ImportStage{In: t.in, Name: fmt.Sprintf("decode, %s, bytes %d-%d", name, off, end), Alone: true,
			Start: at, End: stop, CPU: stopCPU - cpu, PeakRSS: decode.PeakRSS})
		at, off, cpu = stop, end, stopCPU
	}
	for _, r := range spans {
		part("sequential", r.Off, r.Start, r.StartCPU)
		part("parallel", r.End, r.Stop, r.StopCPU)
	}
	part("sequential", size, decode.End, c.cpu0+decode.CPU)
	if ahead.Batches > 0 {
		t.on(ImportStage{In: t.in, Name: fmt.Sprintf("decode, blocks ahead, bytes %d-%d, %d batches", ahead.Off, ahead.End, ahead.Batches),
			Start: c.start, End: decode.End, CPU: ahead.CPU, PeakRSS: decode.PeakRSS})
	}
	if c.thread && len(spans) > 0 {
		t.on(ImportStage{In: t.in, Name: fmt.Sprintf("decode, the decoder's thread, bytes 0-%d", spans[0].Off),
			Start: c.start, End: spans[0].Start, CPU: spans[0].StartThread - c.thread0, PeakRSS: decode.PeakRSS})
	}
}

// peakRSS is the process's peak resident set (VmHWM), in bytes; 0 where
// /proc does not say.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	_, rest, ok := bytes.Cut(b, []byte("VmHWM:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(line), []byte("kB")))), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}
