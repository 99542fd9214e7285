package pipeline

import (
	"runtime"
	"time"

	"github.com/tracer-dev/tracer/internal/cputime"
)

// StageTimes are one Replay's stages, measured for OnStages: the CPU time
// each stage's goroutine spent on its thread, and the Replay's wall time.
// On many cores a replay's wall time is about its slowest stage plus what
// runs before and after them (Open, Finalize, the output).
type StageTimes struct {
	Label string        // the replay's settings (Resolved.Label)
	Read  time.Duration // decoding the trace, on the reader's goroutine (shared by ReplayEach's replays)
	// Decoders and Decoded are the CPU time of the goroutines that decode
	// the trace's record batches ahead of the reader's on many cores
	// (trace.Reader.DecodeAhead), beside Read, and the batches they decoded.
	Decoders time.Duration
	Decoded  int
	Number   time.Duration // numbering its blocks (replay.BlockNumbers), on a goroutine of its own; on many cores its longest part's (replay.PartNumbers) plus that goroutine's wait, the parts' lists being Read's
	Model    time.Duration // the allocator model, with the comparison and the hand-off to the analysis
	Analysis time.Duration // the summaries of the replayed events
	// AnalysisNumber is the numbering of the replayed events' blocks for
	// the summaries, on a goroutine of its own between the model and
	// the analysis (fanout.numberAhead).
	AnalysisNumber time.Duration
	Finalize       time.Duration // the summaries' end, after the stages
	// ModelFaults and AnalysisFaults are the minor page faults of the
	// model's and the analysis's threads: their first touches of fresh
	// memory, which their CPU times count without saying so.
	ModelFaults, AnalysisFaults int64
	Wall                        time.Duration // Replay, from its start to its return
}

// OnStages, when set, receives each Replay's StageTimes as it returns; the
// stages' goroutines then keep their threads for the replay, so that a
// thread's CPU time is its stage's. Linux only (elsewhere the CPU times are
// 0). It is for measuring the command (TRACER_STAGES), not for use while
// replays run.
var OnStages func(StageTimes)

// stageClock measures one goroutine's CPU time from start to stop, with
// its thread kept for it meanwhile; the zero stageClock measures nothing.
type stageClock struct {
	on     bool
	start  time.Duration
	faults int64 // the thread's minor faults at start
}

func startClock(on bool) stageClock {
	if !on {
		return stageClock{}
	}
	runtime.LockOSThread()
	return stageClock{on: true, start: cputime.Thread(), faults: cputime.ThreadFaults()}
}

// lap returns the CPU time since start (or the previous lap) and restarts.
func (c *stageClock) lap() time.Duration {
	d, _ := c.lapFaults()
	return d
}

// lapFaults is lap with the thread's minor faults over the same time.
func (c *stageClock) lapFaults() (time.Duration, int64) {
	if !c.on {
		return 0, 0
	}
	now, faults := cputime.Thread(), cputime.ThreadFaults()
	d, n := now-c.start, faults-c.faults
	c.start, c.faults = now, faults
	return d, n
}

// stop returns the CPU time since start and gives the thread back.
func (c *stageClock) stop() time.Duration {
	d, _ := c.stopFaults()
	return d
}

// stopFaults is stop with the thread's minor faults since the last lap.
func (c *stageClock) stopFaults() (time.Duration, int64) {
	if !c.on {
		return 0, 0
	}
	d, n := c.lapFaults()
	runtime.UnlockOSThread()
	c.on = false
	return d, n
}
