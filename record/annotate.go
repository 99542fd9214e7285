package record

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// The import's annotation pass: the recording replayed on the model under
// its own settings, a chunk at a time, writing the model's block sizes and
// pools into the events on their way to the trace writer.

// annotateBlockSizes fills Event.BlockSize of the recorded allocs and frees,
// which PyTorch does not record, from a replay of the recording under its own
// settings on the allocator model: while the model reproduces the recording
// (each replayed block at its recorded address), each of its blocks is the
// recorded block. It stops annotating at the first disagreement. It hands
// d's events, tagged with their private pools (tagPools) and annotated, to
// the writer on full, in order, a chunk at a time, in buffers from free, and
// reports where the model left the recording (nil if it did not; Seq is
// the index among d's events, Device left for the caller). inferPools says
// conf is the recording's own (the snapshot has its allocator_settings): the
// replay then also infers the private pool of each allocation
// (replay.Options.InferPools).
//
// readChunks reads the chunks into buffers from free, and tags them with
// their pools, a chunk ahead on a goroutine of its own; the replay's source
// (annSource) hands each to the replay whole; the replay writes the model's
// block sizes into it as it goes (replay.Options.Annotate), and the chunk
// goes on to the writer when the replay asks for the next one.
//
// rows are d's empty_cache rows (findEmptyCaches): the chunks carry them,
// and the replay performs them (replay.Options.EmptyCacheRows).
func annotateBlockSizes(conf allocator.Conf, inferPools bool, limit, total int64, initial []trace.Event, d *torchsnap.Device, rows []trace.Event,
	private *privatePools, full chan<- []trace.Event, free <-chan []trace.Event, lastRead func()) (*Divergence, error) {
	return annotateFlipped(conf, inferPools, limit, total, initial, d, rows, nil, 0, nil, private, full, free, lastRead)
}

// annotateFlipped is annotateBlockSizes taking the pools decidePools
// flipped (replay.Options.PoolFlips), and peak, the most of d's blocks
// live at once beyond initial's (reservedScan.blocksPeak; 0 if not
// known), for which the model and the numbering are sized once: made by
// prep, if not nil (prepareAnnotation), which the annotation waits for,
// else here.
func annotateFlipped(conf allocator.Conf, inferPools bool, limit, total int64, initial []trace.Event, d *torchsnap.Device, rows []trace.Event,
	flips map[replay.AllocKey]bool, peak int64, prep *annotationPrep, private *privatePools, full chan<- []trace.Event, free <-chan []trace.Event, lastRead func()) (*Divergence, error) {
	s := &annSource{initial: initial, n: d.Len() + int64(len(rows)), full: full}
	// Before readChunks' goroutine reads private (its visits count too).
	aliases, named := private.poolAliases(), private.ids()
	blocks := annotationBlocks(peak, initial)
	var nums *replay.PartNumbers
	run, numbered := replay.Run, func([]trace.Event) {}
	if prep != nil {
		<-prep.done
		nums, run, numbered = prep.nums, prep.rp.Run, prep.numbered
		stop := make(chan struct{})
		defer close(stop)
		go prep.rp.Follow(&prep.ref, prefaultAhead, true, prep.wake, stop)
	} else {
		nums = annotationNumbers(d.Index, blocks)
	}
	s.ready = readChunks(initial, d, rows, private, free, nums, numbered, lastRead)
	// The recording's segment addresses, and no comparison beyond the
	// allocs' addresses, which the annotation checks: the comparison of
	// every event would have the allocator report them all, which this
	// replay does not need; nor does it need the statistics.
	_, err := run(context.Background(), s, replay.Options{Conf: conf, MemoryLimit: limit, TotalMemory: total, Recorded: true,
		SkipCompare: true, SkipStats: true, Annotate: true, Numbered: true, InferPools: inferPools, PoolFlips: flips, PoolAliases: aliases, NamedPools: named, Left: s.leave, EmptyCacheRows: true,
		Blocks: blocks, Refs: nums.Refs(blocks)}, nil)
	s.finish()
	if err != nil {
		return nil, err
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.left, nil
}

// annSource is annotateBlockSizes' replay source (a replay.BatchSource):
// the reconstructed events, then the device's, a chunk at a time, read
// into buffers from free, tagged with their pools, and handed on full once
// replayed and annotated. It ends the replay at the first chunk boundary
// after the model has left the recording: nothing more can be annotated.
type annSource struct {
	initial []trace.Event
	n       int64            // the device's events and empty_cache rows
	ready   <-chan chunkRead // d's chunks in order (readChunks)
	full    chan<- []trace.Event
	buf     []trace.Event // the current chunk: events [lo, lo+len(buf)) of d
	lo      int64
	served  bool        // initial has been handed out
	left    *Divergence // where the model left the recording
	err     error
}

// NextBatch hands out initial, once readChunks has numbered it, then the
// device's chunks. Each call first hands on the chunk handed out before,
// which the replay is done with.
func (s *annSource) NextBatch() []trace.Event {
	if !s.served {
		s.served = true
		if len(s.initial) > 0 {
			<-s.ready
			return s.initial
		}
	}
	if len(s.initial) >= collectReconstructed {
		// Gathered by the replay, which restores them as it starts on
		// d's events: collected now (the writer wrote them as the import
		// began), their memory serves the restore's, which would
		// otherwise come on top of it, the next collection coming only
		// once the heap has grown by a quarter.
		go runtime.GC()
	}
	s.initial = nil
	if s.left != nil || !s.load() {
		return nil
	}
	return s.buf
}

// Next and Event make annSource a replay.Source; replay.Run, which uses
// NextBatch when a source has it, never calls them.
func (s *annSource) Next() bool          { panic("record: annSource is a batch source") }
func (s *annSource) Event() *trace.Event { panic("record: annSource is a batch source") }
func (s *annSource) Err() error          { return s.err }

// leave notes that the model left the recording at ev, a recorded alloc
// or OOM of the device, whose Seq is its index among the device's events
// and empty_cache rows (withRows) (replay.Options.Left).
func (s *annSource) leave(ev *trace.Event) {
	s.left = &Divergence{Seq: ev.Seq, Addr: ev.Addr, Size: ev.Size, OOM: ev.Kind == trace.KindOOM}
}

// load hands on the current chunk and reads the next one; false at the end
// or on a read error (err).
func (s *annSource) load() bool {
	if s.buf != nil {
		s.full <- s.buf
		s.lo += int64(len(s.buf))
		s.buf = nil
	}
	if s.lo >= s.n || s.err != nil {
		return false
	}
	c := <-s.ready
	if c.err != nil {
		s.err = c.err
		return false
	}
	s.buf = c.evs
	return true
}

// annotationPrep is the memory of a device's annotation, made on a
// goroutine of its own once its size is known, before the annotation
// starts (prepareAnnotation): the
// model (replay.Replayer.Prepare) and the numbering of its blocks. Made
// and first touched on the annotation's thread, they cost it about as
// much as the model's work. done is closed once they are made; their
// pages are then faulted in on another goroutine (replay.Replayer.Follow) a little
// ahead of the model, which the reader paces by the greatest block
// number it has handed on (numbered): faulted in all at once, the
// model's memory would be resident beside all of the events, which go
// back to the system as they are written (torchsnap.Device.DiscardBefore),
// and the import's peak would grow.
type annotationPrep struct {
	done chan struct{}
	rp   replay.Replayer
	nums *replay.PartNumbers

	ref  atomic.Int32  // the greatest number handed on so far
	wake chan struct{} // ref has grown
}

// prefaultAhead is how many block numbers past the greatest handed on the
// model's memory is faulted in (~6 MB of the arena and the table), so
// that the goroutine that faults it in keeps ahead of the model when it
// wakes late (16k numbers left it behind on a busy 2-core VM). What it
// faults in ahead is resident at the import's peak where the peak comes
// before the most blocks live at once (an import decoded in memory).
const prefaultAhead = 64 << 10

// prepareAnnotation makes device's annotation's memory for conf and
// blocks live at once, on goroutines of its own: the numbering of its
// blocks (annotationNumbers' tables, in numberParts(spilled) parts,
// faulted in at once: hash tables, which the first hundredths of the
// blocks reach all of), and the model (replay.Replayer.Prepare) with the
// first prefaultAhead of its blocks' pages.
func prepareAnnotation(conf allocator.Conf, device int32, blocks int, spilled bool) *annotationPrep {
	p := &annotationPrep{done: make(chan struct{}), wake: make(chan struct{}, 1)}
	p.nums = replay.NewPartNumbers(numberParts(spilled), false)
	refs := p.nums.Refs(blocks)
	go func() {
		defer close(p.done)
		// The numbering's tables beside the model's: the runtime clears
		// reused memory on the goroutine that allocates it.
		var wg sync.WaitGroup
		wg.Go(func() {
			p.nums.Reserve(device, blocks)
			p.nums.Prefault(device)
		})
		// An error (conf the model refuses) is the annotation's to meet
		// in its Run, which makes the allocator again.
		if p.rp.Prepare(replay.Options{Conf: conf, Blocks: blocks, Refs: refs}) == nil {
			p.rp.PrefaultBelow(prefaultAhead)
			p.rp.NodesAhead()
		}
		wg.Wait()
	}()
	return p
}

// numbered is told of each chunk the reader hands on, on its goroutine.
func (p *annotationPrep) numbered(evs []trace.Event) {
	top := p.ref.Load()
	for i := range evs {
		top = max(top, evs[i].Ref)
	}
	if top > p.ref.Load() {
		p.ref.Store(top)
	}
	// Every chunk, numbers or not: its frees may take the free sets' tree
	// nodes.
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// discard stops p's numbering, for an import that failed before its
// annotation took p (nil: nothing to do).
func (p *annotationPrep) discard() {
	if p != nil {
		<-p.done
		p.nums.Close()
	}
}

// numberParts is how many parts number the blocks of an import's first
// annotation: replay.NumberParts of the cores, but one for a spilled
// trace (a file under streamMax, whose memory counts), whose reader then
// numbers each chunk itself: several parts' tables, each kept less full
// than one large table, raise a mid-size import's peak, where one part
// numbers a chunk in less time than the replay takes for it.
func numberParts(spilled bool) int {
	if spilled {
		return 1
	}
	return replay.NumberParts(runtime.GOMAXPROCS(0))
}

// annotationNumbers is the numbering of an annotation's blocks (see
// readChunks), in parts on many cores, sized for blocks live at once (if
// not 0).
func annotationNumbers(device int32, blocks int) *replay.PartNumbers {
	nums := replay.NewPartNumbers(replay.NumberParts(runtime.GOMAXPROCS(0)), false)
	if blocks > 0 {
		nums.Reserve(device, blocks)
	}
	return nums
}

// annotationBlocks is the most blocks live at once in a device's
// annotation, for which its memory is made, from peak, the most of its
// recorded blocks live at once beyond initial's (reservedScan.blocksPeak),
// and initial, its reconstructed events; 0 if peak is not known.
func annotationBlocks(peak int64, initial []trace.Event) int {
	if peak <= 0 {
		return 0
	}
	return int(peak) + allocsIn(initial)
}

// chunkRead is a chunk of events readChunks read, or why it could not.
type chunkRead struct {
	evs []trace.Event
	err error
}

// readChunks reads d's events a chunk at a time, in order, into buffers
// from free, inserts its empty_cache rows (withRows), tags them with their
// pools, numbers their blocks (replay.PartNumbers, for the replay's
// Options.Numbered: the address lookups move off the replay's goroutine,
// and on many cores are split among parts, a few chunks in flight), and
// delivers them on the channel it returns, which holds half as many
// chunks as free has buffers (at least 2). A non-empty initial, the events
// before d's, is numbered first and delivered as a chunk of its own. It
// stops after the last chunk, or after delivering a read error; then it
// calls lastRead, if set. nums numbers the blocks (annotationNumbers); it
// closes it. numbered is told of each chunk it delivers, as it does.
func readChunks(initial []trace.Event, d *torchsnap.Device, rows []trace.Event, private *privatePools, free <-chan []trace.Event, nums *replay.PartNumbers,
	numbered func([]trace.Event), lastRead func()) <-chan chunkRead {
	ready := make(chan chunkRead, max(2, (cap(free)-2)/2))
	go func() {
		if lastRead != nil {
			defer lastRead()
		}
		defer nums.Close()
		// The chunks handed to the numbering, delivered in order once
		// numbered: when more than ahead are (numberingAhead in parts, or
		// at once on this goroutine), or before the reader would wait for
		// a buffer (the replay may be waiting for one of them).
		var numbering [][]trace.Event
		ahead := 0
		if nums.Parts() > 1 {
			ahead = numberingAhead
		}
		deliver := func() {
			nums.Done()
			numbered(numbering[0])
			ready <- chunkRead{evs: numbering[0]}
			numbering = numbering[1:]
		}
		defer func() {
			for len(numbering) > 0 {
				deliver()
			}
		}()
		if len(initial) > 0 {
			nums.Start(initial)
			numbering = append(numbering, initial)
			initial = nil // numbering holds it until it is delivered
		}
		n := d.Len()
		before := 0 // rows before lo
		for lo := int64(0); lo < n; lo += torchsnap.ChunkSize {
			var buf []trace.Event
			for got := false; !got; {
				select {
				case buf = <-free:
					got = true
				default:
					if len(numbering) == 0 {
						buf, got = <-free, true
					} else {
						deliver()
					}
				}
			}
			if d.Events != nil {
				// In memory the writer hands back views of the trace, which Validate may still read: not buffers for withRows.
				buf = nil
			}
			evs, err := d.Chunk(lo, min(n, lo+torchsnap.ChunkSize), buf)
			if err != nil {
				for len(numbering) > 0 {
					deliver()
				}
				ready <- chunkRead{err: err}
				return
			}
			if len(rows) > 0 {
				start := before
				evs = withRows(evs, buf, lo, rows, before)
				for before < len(rows) && rows[before].Seq < lo+torchsnap.ChunkSize {
					before++
				}
				if lo+torchsnap.ChunkSize >= n {
					evs = withTrailingRows(evs, rows, start, n)
				}
			}
			tagPools(evs, private)
			nums.Start(evs)
			numbering = append(numbering, evs)
			if len(numbering) > ahead {
				deliver()
			}
		}
	}()
	return ready
}

// numberingAhead is how many chunks the annotation's reader keeps in the
// numbering's parts before it delivers the oldest: enough that a part
// whose wake-up is slow still has work queued.
const numberingAhead = 3

// annotationBuffers is how many chunk buffers an import's annotation
// reader, replay and writer pass around (free), of which readChunks may
// fill half ahead of the replay. A chunk is 1,024 events, about 0.1 ms of
// the replay: with 4 buffers each wake-up of the reader or the writer,
// which many cores make slow, could leave the replay waiting (on the GPU
// host the annotation's wall was 1.6x its CPU). A spilled trace (a smaller
// file, or few cores), whose buffers are most of its memory, has 8 on 8
// cores or more, where 4 left the replay waiting for the slow wake-ups,
// and 4 on fewer.
func annotationBuffers(spilled bool) int {
	if spilled {
		if runtime.GOMAXPROCS(0) >= 8 {
			return 8
		}
		return 4
	}
	return 34
}

// annotationChunks is how many chunk buffers the annotation of a device of
// n events makes, of inFlight at most (annotationBuffers), and how many
// events each holds: readChunks reads the n events torchsnap.ChunkSize at
// a time, one buffer a chunk, so a device of fewer chunks than inFlight
// has a buffer a chunk, and one of less than a chunk buffers of n events;
// any other has inFlight buffers of a chunk. (The buffers the writer hands
// back are those, or larger ones withRows made.)
func annotationChunks(inFlight int, n int64) (bufs, size int) {
	chunks := (max(n, 0) + torchsnap.ChunkSize - 1) / torchsnap.ChunkSize
	return int(max(1, min(int64(inFlight), chunks))), int(min(max(n, 0), torchsnap.ChunkSize))
}

// finish hands on the chunk in hand and every chunk the replay did not
// reach, unannotated from the first disagreement on.
func (s *annSource) finish() {
	for s.load() {
	}
}

// allocsIn counts the allocs among evs: a bound on the blocks they leave
// live.
func allocsIn(evs []trace.Event) int {
	n := 0
	for i := range evs {
		if evs[i].Kind == trace.KindAlloc {
			n++
		}
	}
	return n
}
