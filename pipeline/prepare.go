package pipeline

import (
	"os"
	"sync/atomic"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/replay"
)

// modelPrep is the memory of a replay's model (replay.Replayer.Prepare:
// its block arena and its table of numbered blocks), made on a goroutine
// of its own before the model starts, and then faulted in by another a
// little ahead of the model (Replayer.Follow), paced by the greatest
// block number the numbering has handed on (readAhead.top). Grown by
// doubling on the model's thread, as a replay otherwise makes them, they
// were copied at each doubling into fresh memory, a page fault a page:
// about a third of the model stage's CPU on small.trace. They are made
// outside the Go heap (Replayer.PrepareOffHeap) and given back by finish:
// sized by a guess, on the heap the collector counted them whole, and a
// trace of few blocks live held a quarter of the guess in garbage.
type modelPrep struct {
	rp     replay.Replayer
	done   chan struct{} // closed once Prepare has returned
	blocks int
	size   int64 // the trace file's bytes
	stop   chan struct{}
	ok     bool          // Prepare made the memory
	follow chan struct{} // closed once Follow has returned
}

// bytesPerBlock is how many bytes of a trace file modelPrep reserves one
// block for: a block live at once needs its alloc event, and a trace
// takes 85 bytes an event on the scale snapshots (stacks included), whose
// peaks of live blocks are a half and a third of their events. A
// reservation too small leaves the rest to the model's doubling, as
// before; one too large is address space never touched, since only what
// the numbers reach is faulted in.
const bytesPerBlock = 128

// prepareMin is the least trace file, in bytes, whose model is prepared:
// below it the arrays are small, and a replay of a small trace (tracer
// tune's, the tests') would spend more on the goroutines. From 1 MiB
// (about 10k events) the model's thread would spend more on the memory
// than that: at 94k events its first touches were about half of its CPU.
var prepareMin int64 = 1 << 20

// prefaultAhead is how many block numbers past the greatest handed on are
// faulted in (about 3 MB of the arena and the table), on top of the
// numbering's own lead over the model (the batches between them, up to
// 40k events). What lies past the last number is resident for nothing:
// 128k numbers cost seed1m's what-if 10 MB of its peak.
const prefaultAhead = 32 << 10

// prefaultFirst is how many block numbers are faulted in before the model
// starts: Follow's lead then doubles with the numbers reached, up to
// prefaultAhead, so that a trace of few blocks live has little resident.
const prefaultFirst = 4 << 10

// unmapBehind gives back h's memory on a goroutine of its own, off the
// path to a replay's return (the summaries' tables: their pages' freeing
// is the caller's wait for nothing); a variable for the tests.
var unmapBehind = func(h *grow.OffHeap) { go h.Release() }

// prepareModel starts making the model's memory of a replay of in under s
// with opt, where that pays: a simulated device, no Replayer of the
// caller's, a trace file of prepareMin bytes or more. It returns nil
// otherwise.
func prepareModel(in *Input, s Resolved, opt Options) *modelPrep {
	if opt.Replayer != nil || opt.NewDevice != nil || in.Path == "" {
		return nil
	}
	blocks, size := in.blocksGuess()
	if blocks == 0 {
		return nil
	}
	p := &modelPrep{done: make(chan struct{}), stop: make(chan struct{}), blocks: blocks, size: size}
	go func() {
		defer close(p.done)
		// An error (settings the model refuses) is Run's to meet.
		p.ok = p.rp.PrepareOffHeap(replay.Options{Conf: s.Conf, TotalMemory: s.Total, MemoryLimit: s.Limit, Blocks: p.blocks}) == nil
		if p.ok {
			p.rp.PrefaultBelow(prefaultFirst)
		}
	}()
	return p
}

// BlocksGuess is about the most blocks live at once that in's trace file
// could hold, for a replay's Options.Blocks (tracer tune's): its model's
// block arena is then made once, not doubled to its size, each doubling
// copying every block. 0 for the built-in sample, a file under prepareMin
// or one that cannot be read. A guess too large is address space the
// replay never touches.
func (in *Input) BlocksGuess() int {
	n, _ := in.blocksGuess()
	return n
}

// blocksGuess is BlocksGuess and the file's size.
func (in *Input) blocksGuess() (blocks int, size int64) {
	if in.Path == "" {
		return 0, 0
	}
	st, err := os.Stat(in.Path)
	if err != nil || st.Size() < prepareMin {
		return 0, 0
	}
	return int(min(st.Size()/bytesPerBlock, 1<<30)), st.Size()
}

// replayer waits for the memory and returns the Replayer that holds it,
// with its prefaulting started, woken by wake as top grows; finish stops it.
func (p *modelPrep) replayer(top *atomic.Int32, wake <-chan struct{}) *replay.Replayer {
	<-p.done
	if p.ok {
		p.follow = make(chan struct{})
		go func() {
			defer close(p.follow)
			p.rp.Follow(top, prefaultAhead, false, wake, p.stop)
		}()
	}
	return &p.rp
}

// finish stops the prefaulting, once the Run has returned, and gives the
// memory back (Replayer.Release, which unmaps it on a goroutine of its
// own: nothing reads the Result's allocator).
func (p *modelPrep) finish() {
	close(p.stop)
	if p.follow != nil {
		<-p.follow
	}
	p.rp.Release()
}
