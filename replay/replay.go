package replay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// Source is a stream of trace events in trace order: a trace.Reader or a
// SliceSource.
type Source interface {
	Next() bool
	Event() *trace.Event
	Err() error
}

// BatchSource is a Source that can also hand out its events a batch at a
// time. Run uses NextBatch, and never Next, when its source offers it: the
// batch spares an interface call and a copy per event.
type BatchSource interface {
	Source
	// NextBatch returns the next events in trace order, or an empty slice at
	// the end of the stream (Err then says whether it ended early). The
	// events stay valid until the next call to NextBatch or Next; the
	// caller does not modify them.
	NextBatch() []trace.Event
}

// ctxEvery is how many events Run replays between checks of its context (a
// power of two).
const ctxEvery = 1 << 16

// SliceSource is a Source (and a BatchSource) over events held in memory.
type SliceSource struct {
	events []trace.Event
	i      int
}

// NewSliceSource returns a Source yielding evs in order.
func NewSliceSource(evs []trace.Event) *SliceSource { return &SliceSource{events: evs} }

// Next advances to the next event.
func (s *SliceSource) Next() bool {
	if s.i >= len(s.events) {
		return false
	}
	s.i++
	return true
}

// Event returns the current event.
func (s *SliceSource) Event() *trace.Event { return &s.events[s.i-1] }

// NextBatch returns every event not yet served.
func (s *SliceSource) NextBatch() []trace.Event {
	b := s.events[s.i:]
	s.i = len(s.events)
	return b
}

// Err is always nil.
func (s *SliceSource) Err() error { return nil }

// Observer receives every event the replayed allocator emits, converted to
// trace.Event with BlockSize filled. The pointer is valid only during the call.
type Observer interface {
	Event(ev *trace.Event)
}

// A SlotObserver is an Observer that lends the replay the event to fill:
// the replay writes an event where Slot points and passes that pointer to
// Event, and the observer keeps it where it is instead of copying it (an
// allocator event a replay emits is about a hundred bytes, and most events
// emit one). Event may also be passed other pointers, which it copies as
// an Observer does. A slot is valid until the next call to Event.
type SlotObserver interface {
	Observer
	Slot() *trace.Event
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ev *trace.Event)

// Event calls f(ev).
func (f ObserverFunc) Event(ev *trace.Event) { f(ev) }

// Options configure Run.
type Options struct {
	// Conf is the allocator configuration to replay under.
	Conf allocator.Conf
	// TotalMemory is the simulated device's capacity in bytes (default 80 GiB).
	TotalMemory int64
	// MemoryLimit is the per-process limit in bytes, floor(fraction × total);
	// 0 for none. It overrides Conf.MemoryFraction.
	MemoryLimit int64
	// Recorded says the trace was recorded under Conf: segment addresses are
	// taken from the recording and every replayed event is compared with the
	// recorded one (Result mismatches).
	Recorded bool
	// MaxMismatches bounds the mismatches kept per device (default 10).
	MaxMismatches int
	// PrivateSegments lists segments known to belong to private pools (CUDA
	// graphs, MemPool), e.g. from a snapshot's `segments` with a non-zero
	// segment_pool_id. torch 2.11 traces carry no pool id, so this is how a
	// replay learns which allocations a capture routed to a private pool: an
	// alloc whose recorded address lies in such a segment is replayed inside
	// BeginAllocateToPool/EndAllocateToPool of its pool. The first use of a
	// pool is preceded by the empty_cache() that torch.cuda.graph performs
	// when a capture starts.
	PrivateSegments []allocator.SegmentInfo
	// NewDevice, if set, builds the device of an ordinal instead of a
	// SimDevice of TotalMemory.
	NewDevice func(device int32) allocator.Device
	// Annotate, with Recorded, writes the model's block sizes into the
	// source's own events, which must be a BatchSource's (the caller's
	// memory; a Source's single event is rewritten at each step): the
	// BlockSize of every recorded alloc the model puts at its recorded
	// address, and of the frees of those blocks and of reconstructed ones,
	// until the model first leaves the recording. It leaves it at a
	// recorded alloc it puts elsewhere or cannot make, or a recorded OOM
	// it satisfies; from there on it writes nothing, and calls Left with
	// that event, once. PyTorch records no block sizes; tracer import
	// takes them from here. The model reports each block's size to the
	// replay by its handle, with no event made or observer called.
	Annotate bool
	Left     func(ev *trace.Event)
	// LeftAt, if set, is called before Left when the model left the
	// recording by putting the recorded alloc ev at another address, addr.
	LeftAt func(ev *trace.Event, addr uint64)
	// InferPools, with Annotate, infers the private pool of every recorded
	// alloc that the trace does not tag and writes it into the event
	// (pools.go). It needs the recording's own settings: under others a
	// disagreement of the model would be taken for a pool.
	InferPools bool
	// PoolAliases, with InferPools, maps pools the inference would
	// invent to the pools they are (DeviceResult.Aliases).
	PoolAliases map[allocator.PoolID]allocator.PoolID
	// PoolFlips, with InferPools, names recorded allocs that made a new
	// segment and whose inferred pool is wrong: one inferred to the
	// default pools was a private pool's, and the reverse. tracer import
	// finds them where the model leaves the recording at a later reuse of
	// the segment (record's decidePools).
	PoolFlips map[AllocKey]bool
	// NamedPools, with InferPools, are the private pools the snapshot names
	// (its dumped segments'): a MemPool the inference finds takes one of
	// their ids that no recorded alloc has had yet, the next in PyTorch's
	// numbering, rather than a new id (unmetMemPool).
	NamedPools []allocator.PoolID
	// SkipCompare, with Recorded, takes the segments' addresses from the
	// recording but compares nothing with it (no Mismatches, no
	// NumMismatches), for a caller that checks what it needs itself and
	// spares the allocator reporting every event.
	SkipCompare bool
	// EmptyCacheRows says the trace states the user's empty_cache() calls
	// as KindEmptyCache rows (trace.Meta.EmptyCacheRows, tracer import's
	// traces): the replay performs EmptyCache at each row and treats the
	// recorded segment_free/segment_unmap rows as outcomes only, so that
	// every replay, under any settings, makes the same requests. Without
	// it the calls are inferred from the releases (settle), until the
	// first KindEmptyCache row, which turns the rows on for its device.
	EmptyCacheRows bool
	// InferEmptyCaches, with Recorded, ignores the trace's KindEmptyCache
	// rows and infers the calls from the releases on the model, as import
	// does: rows that an import decided without the run's memory limit
	// take the releases of garbage collection or of a retry under that
	// limit for empty_cache() calls.
	InferEmptyCaches bool
	// EmptyCacheAfterOOM says the program empties the cache when it
	// catches an OOM, which a recording cannot show where the OOM's own
	// flush left nothing to release: inferring the calls (Recorded, no
	// rows), the replay then takes one to follow each recorded OOM after
	// which the program made another request, where the recording allows
	// it (see afterOOM). A trace says so in its Extra
	// (trace.ExtraEmptyCacheAfterOOM).
	EmptyCacheAfterOOM bool
	// Numbered says the source's alloc and free_* events carry the numbers
	// BlockNumbers gives (trace.Event.Ref): the replay then finds their
	// blocks by number. Otherwise it ignores Ref, which other producers of
	// events need not set.
	Numbered bool
	// EmptyCacheFound, if set, receives each run of recorded releases the
	// replay attributes to an empty_cache() call it infers: the run's first
	// event, and the bytes the run released (tracer import writes a
	// KindEmptyCache row there).
	EmptyCacheFound func(first *trace.Event, released int64)
	// SkipStats leaves the allocator's statistics out, for a caller that
	// reads none (tracer import's annotation): the allocator spares their
	// updates (allocator.Allocator.SkipBlockStats), DeviceResult.Stats
	// is zero and OOM.FreeCached 0. It changes nothing else.
	SkipStats bool
	// Blocks, if set, is about the most blocks live at once on a device
	// (tracer import counts them as it scans the recording): the model's
	// block arena and the replay's table of numbered blocks are made for
	// them once instead of doubled to that size. It changes no result.
	Blocks int
	// Refs, if set with Numbered, is about the greatest number the events
	// carry (PartNumbers.Refs of Blocks), for which the table of numbered
	// blocks is made once; 0: Blocks. It changes no result.
	Refs int
}

// OOM is one failed allocation of the replay.
type OOM struct {
	Seq        int64 // index of the request event in the trace
	Size       int64 // requested bytes
	Stream     uint64
	Stack      trace.StackID
	FreeCached int64 // reserved but unallocated bytes at that moment
	Recorded   bool  // the recording failed here too
}

// Mismatch is a difference between the replay and the recording.
type Mismatch struct {
	Seq  int64 // index of the recorded event
	What string
}

// DeviceResult is the outcome of one device's replay.
type DeviceResult struct {
	Device    int32
	Allocator *allocator.Allocator // final state: Segments, Stats
	// Stats are the final counters; Stats.Map() names them as
	// torch.cuda.memory_stats() does. The map is not made here: a replay of a
	// small snapshot would spend more on it than on its events.
	Stats allocator.Stats
	OOMs  []OOM
	// AvoidedOOMs counts recorded OOMs that succeeded in the replay (the block
	// was freed at once).
	AvoidedOOMs   int
	Mismatches    []Mismatch
	NumMismatches int
	// EmptyCaches counts inferred torch.cuda.empty_cache() calls.
	EmptyCaches int
	// InferredPools counts the private pools InferPools invented.
	InferredPools int
	// Fresh are the recorded allocs whose pool InferPools inferred as
	// they made a segment, in order.
	Fresh []FreshAlloc
	// Aliases maps a pool InferPools invented for the first allocation
	// of a capture to the pool the capture went on in (captures.go); the
	// caller replays again with them (Options.PoolAliases).
	Aliases map[allocator.PoolID]allocator.PoolID
	// Events counts the recorded events consumed.
	Events int64
}

// Result is the outcome of Run, one entry per device in ordinal order.
type Result struct {
	Devices []DeviceResult
}

// Run replays the request stream of src on a fresh allocator per device and
// reports every replayed event to obs (which may be nil). Requests are taken
// from the recording: alloc → Malloc(size, stream); free_requested → Free,
// pending when its free_completed does not follow at once; a later
// free_completed → CompleteFree; oom → a Malloc of the rounded size expected
// to fail; empty_cache → EmptyCache (or, in a trace without such rows,
// segment_free/segment_unmap runs no malloc explains → EmptyCache);
// leading FlagReconstructed events → Restore.
//
// A Replayer replays as Run does, reusing its memory from one replay to the
// next.
func Run(ctx context.Context, src Source, opts Options, obs Observer) (*Result, error) {
	return (&runner{out: new(runResult)}).run(ctx, src, opts, obs)
}

// run is Run on x: a new runner, or one a Replayer recycled.
func (x *runner) run(ctx context.Context, src Source, opts Options, obs Observer) (*Result, error) {
	res, err := x.replay(ctx, src, opts, obs)
	if err != nil {
		for _, r := range x.list {
			r.endHandoff(false, true)
		}
	}
	return res, err
}

// replay is run but for the hand-off's end after an error.
func (x *runner) replay(ctx context.Context, src Source, opts Options, obs Observer) (*Result, error) {
	if opts.TotalMemory == 0 {
		opts.TotalMemory = 80 << 30
	}
	if opts.MaxMismatches == 0 {
		opts.MaxMismatches = 10
	}
	x.opts, x.obs = opts, obs
	x.list = x.list[:0] // a recycled runner's, which may have grown
	if x.list == nil {
		x.list = x.first[:0]
	}
	var r *deviceReplay // the device of the previous event, nearly always the next one's
	if bs, ok := src.(BatchSource); ok {
		// The batch path: no interface call and no copy per event; a held
		// free_requested points into the batch until the batch ends.
		for {
			evs := bs.NextBatch()
			if len(evs) == 0 {
				break
			}
			for len(evs) > 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				chunk := evs[:min(len(evs), ctxEvery)]
				evs = evs[len(chunk):]
				var err error
				if r, err = x.batch(r, chunk); err != nil {
					return nil, err
				}
			}
			for _, d := range x.list {
				d.keepExpected()
				d.keepHeld()
			}
		}
	} else {
		var n int64
		for src.Next() {
			if n++; n&(ctxEvery-1) == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			// One event at a time through the batch loop. The source reuses
			// its event, so a free_requested held on it is copied at once.
			var err error
			if r, err = x.batch(r, unsafe.Slice(src.Event(), 1)); err != nil {
				return nil, err
			}
			r.keepExpected()
			r.keepHeld()
		}
	}
	if err := src.Err(); err != nil {
		return nil, fmt.Errorf("replay: reading trace: %w", err)
	}
	slices.SortFunc(x.list, func(a, b *deviceReplay) int { return cmp.Compare(a.device, b.device) })
	res := &x.out.res
	res.Devices = res.Devices[:0] // a recycled result's, else nil
	if res.Devices == nil {
		res.Devices = x.out.devs[:0]
	}
	if len(x.list) > cap(res.Devices) {
		res.Devices = make([]DeviceResult, 0, len(x.list))
	}
	for _, r := range x.list {
		if err := r.finish(); err != nil {
			return nil, fmt.Errorf("replay: device %d: end of trace: %w", r.device, err)
		}
		r.endHandoff(true, true)
		if !x.opts.SkipStats {
			r.res.Stats = r.a.Stats()
		}
		res.Devices = append(res.Devices, r.res)
	}
	return res, nil
}

// runner is Run's state besides the event loop's.
//
// It holds the options by value and the first device's replay, and out
// holds the result with the first device's SimDevice, so that they cost
// no allocations of their own: a replay of a small snapshot spends as much
// on making its objects (and collecting them) as on its events.
type runner struct {
	list  []*deviceReplay // the devices seen, in order of first event (few)
	first [1]*deviceReplay
	opts  Options
	obs   Observer
	dev0  deviceReplay // first[0]
	out   *runResult
	// reuse says a Replayer owns x: the replays of the devices besides the
	// first come from extra, with their SimDevices (reuse.go).
	reuse  bool
	extra  []*extraDevice
	nextra int // extra's used by this Run
}

// runResult is what Run returns, with room for one device. The first
// device's SimDevice lies here rather than in the runner: its allocator,
// which the result holds, keeps it alive, and should not keep the replay's
// state alive with it.
type runResult struct {
	res  Result
	devs [1]DeviceResult
	sim  allocator.SimDevice
}

// get returns the replay of device d, made on its first event.
func (x *runner) get(d int32) (*deviceReplay, error) {
	for _, r := range x.list {
		if r.device == d {
			return r, nil
		}
	}
	r, sim := &x.dev0, &x.out.sim
	if len(x.list) > 0 {
		r, sim = x.another()
	}
	if err := r.init(d, &x.opts, x.obs, sim); err != nil {
		return nil, err
	}
	// The first device's events go to an EmittedObserver as the model
	// writes them; from a second device's on, the devices' events
	// interleave, and go to the Observer one by one.
	if len(x.list) == 0 {
		r.startHandoff()
	} else {
		for _, o := range x.list {
			o.endHandoff(true, true)
		}
	}
	x.list = append(x.list, r)
	return r, nil
}

// batch replays evs, starting with r as the device of the previous event
// (nil for none), and returns the device of the last one. A free_requested
// it holds points into evs: Run copies it (keepHeld) before the batch's
// memory is reused.
//
// It is Run's loop for a BatchSource, kept apart so that little is live
// across its calls.
func (x *runner) batch(r *deviceReplay, evs []trace.Event) (*deviceReplay, error) {
	peekAt := 0 // the index of the next event peek has not seen
	for i := 0; i < len(evs); i++ {
		if r != nil && r.calm && !r.hasHold {
			var err error
			if i, err = r.calmRun(evs, i); err != nil || i == len(evs) {
				return r, err
			}
		}
		if i >= peekAt && r != nil && !r.numbered {
			peekAt = min(i+peekAhead, len(evs))
			r.peek(evs[i:peekAt])
		}
		ev := &evs[i]
		var err error
		switch {
		case r == nil || r.device != ev.Device:
			if r, err = x.get(ev.Device); err == nil {
				err = r.push(ev)
				r.recalm()
			}
		case r.hasHold:
			if r.calmPair(r.held, ev) {
				r.hasHold = false
				err = r.freePair(r.held, ev)
			} else {
				err = r.push(ev)
				r.recalm()
			}
		case ev.Kind == trace.KindFreeRequested:
			// Not followed by its free_completed (calmRun takes those while
			// r is calm, and calmPair needs it calm): held.
			r.hold(ev)
		default:
			err = r.push(ev)
			r.recalm()
		}
		if err != nil {
			return r, eventError(ev, err)
		}
	}
	return r, nil
}

// recalm sets r.calm and r.calmAlloc from r's state after push: the
// events replayed by push are the only ones that change what they test
// (alloc and freePair, the fast paths, change none of it).
func (r *deviceReplay) recalm() {
	r.calm = r.restored && len(r.reclaim) == 0 && len(r.late) == 0 && r.quietOOM.Kind == trace.KindInvalid
	r.calmAlloc = r.calm && !r.routed() && !r.caps.capturing()
}

// calmPair is completes for the batch loop, with plain's test of r's
// state read from r.calm.
func (r *deviceReplay) calmPair(req, next *trace.Event) bool {
	return next.Kind == trace.KindFreeCompleted && next.Addr == req.Addr && next.Device == req.Device &&
		req.Flags&trace.FlagReconstructed == 0 && r.calm
}

// peekAhead is how many events batch peeks at (deviceReplay.peek) before
// replaying them: enough cache misses to overlap, few enough cache lines
// to stay in L1 until the events are replayed.
const peekAhead = 16

func eventError(ev *trace.Event, err error) error {
	return fmt.Errorf("replay: event %d (%s): %w", ev.Seq, ev.Kind, err)
}
