package replay

import (
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// deviceReplay replays the events of one device. It holds one event of
// lookahead, because a free_requested is synchronous only when its
// free_completed follows at once.
type deviceReplay struct {
	device   int32
	opts     *Options
	recorded bool // opts.Recorded and not opts.SkipCompare: compare with the recording
	annotate bool // opts.Annotate (with Recorded), until the model leaves the recording
	rows     bool // the trace states its empty_cache calls (Options.EmptyCacheRows, or a row seen)
	obs      Observer
	slots    SlotObserver // obs, when it lends the events to fill
	a        *allocator.Allocator
	sim      *allocator.SimDevice // nil when NewDevice built something else
	dev      allocator.Device

	// held is a free_requested awaiting the next event of the device, which
	// tells whether the free was synchronous. Other events need no lookahead
	// and are replayed as they come. It points into the source's current
	// batch, or to heldBuf once that may change (see Run).
	held    *trace.Event
	heldBuf trace.Event
	hasHold bool

	// live maps a recorded block address (and number) to the replayed
	// block, for blocks live (or pending) in the recording.
	live     liveBlocks
	numbered bool // opts.Numbered: events carry their blocks' numbers
	// calm is plain's test of r's state, and calmAlloc the alloc fast
	// path's (calm, no private pool routing, no capture), as of the last
	// event push replayed: only push changes what they test, so the batch
	// loop reads them instead of testing eight fields per event (recalm).
	calm, calmAlloc bool
	// mayBare: the events are numbered, and no observer or comparison
	// reads the allocator's events, nor so the request's time and stack
	// (see bare).
	mayBare bool
	peeked  uint64 // peek's loads, kept so they are made
	// annotatedBare counts the events bareAnnotated replayed (for tests).
	annotatedBare int64

	// restore state gathered from leading FlagReconstructed events, and
	// the events themselves when an observer wants them (restoreEvs).
	restoreSegs []allocator.SegmentInfo
	// restoreUnsorted: restoreSegs are not in address order (restoreSeg).
	restoreUnsorted bool
	// restoreBlocks: the live blocks gathered for restoreSegs.
	restoreBlocks restoreBlocks
	restoreEvs    restoreLog
	restored      bool

	// reclaim holds recorded segment_free/segment_unmap events not yet
	// attributed to a malloc or to empty_cache; with rows, the empty_cache
	// rows not yet performed instead (they are, at the next request), each
	// followed by the recorded releases after it.
	reclaim []trace.Event
	// Under settings other than the recording's (see follow): the
	// recorded segments made for the request being replayed, the
	// recorded cudaMalloc and cudaFree calls before it, whether the
	// replay's calls have parted from the recording's, and whether
	// follow planned addresses for the request.
	followSegs           []allocator.SegmentInfo
	recMallocs, recFrees int64
	parted, following    bool
	// caps tracks the episodes of CUDA graph pools (captures.go), and
	// called the requests since the last empty_cache call.
	caps   captures
	called sinceCall
	// late are the blocks of the recorded free_completed events since the
	// last request, not yet completed in the model; lateReleased says a
	// segment release has followed them (late.go).
	late         []blockRef
	lateReleased bool
	// quietOOM is the recorded OOM after which the model would have
	// released nothing, while no release or request has followed it
	// (Kind KindInvalid: none); see afterOOM.
	quietOOM trace.Event

	// expect holds recorded events the allocator has yet to emit
	// (Recorded mode), from expectHead on: in the source's batch (or
	// heldBuf) until the batch ends, then in copies of their own
	// (keepExpected); those before expectKeptTo are such copies already.
	expect       []*trace.Event
	expectHead   int
	expectKeptTo int

	pools   poolRoute               // private pools (pools.go)
	private []allocator.SegmentInfo // Options.PrivateSegments of private pools

	// The request being replayed, for the TimeUs and Stack of what it emits.
	curTime  int64
	curStack trace.StackID
	out      trace.Event
	outSeq   int64
	res      DeviceResult
	// hand is the hand-off of the events to an EmittedObserver
	// (handoff.go).
	hand handoff
}

// blockRef is a replayed block: its address, and the allocator's handle for
// it, which spares the allocator an address lookup when the block is freed
// (a zero handle for restored blocks, freed by address).
type blockRef struct {
	addr uint64
	h    allocator.Handle
}

// init makes r, zero or recycled (reuse.go), the replay of device d. sim,
// if not nil, is where to make the device's SimDevice (when opts.NewDevice
// does not build it).
func (r *deviceReplay) init(d int32, opts *Options, obs Observer, sim *allocator.SimDevice) error {
	r.device, r.opts, r.recorded, r.obs, r.curStack = d, opts, opts.Recorded && !opts.SkipCompare, obs, trace.NoStack
	r.slots, _ = obs.(SlotObserver)
	r.annotate = opts.Annotate && opts.Recorded
	r.numbered = opts.Numbered
	r.mayBare = opts.Numbered && obs == nil && !r.recorded
	r.rows = opts.EmptyCacheRows && !opts.InferEmptyCaches
	var dev allocator.Device
	switch {
	case opts.NewDevice != nil:
		dev = opts.NewDevice(d)
	case sim != nil:
		sim.Reset(opts.TotalMemory) // as NewSimDevice makes it
		dev = sim
	default:
		dev = allocator.NewSimDevice(opts.TotalMemory)
	}
	r.sim, _ = dev.(*allocator.SimDevice)
	r.dev = dev
	for _, sg := range opts.PrivateSegments {
		if !sg.Pool.IsDefault() {
			r.private = append(r.private, sg)
		}
	}
	conf := opts.Conf
	if opts.MemoryLimit > 0 {
		conf.MemoryFraction = 1 // the explicit byte limit wins
	}
	a, err := r.allocator(conf, dev)
	if err != nil {
		return err
	}
	if opts.MemoryLimit > 0 {
		a.SetMemoryLimit(opts.MemoryLimit)
	}
	a.BriefOOMs(true) // a replay counts its OOMs and prints no message
	a.SkipBlockStats(opts.SkipStats)
	if n := opts.Blocks; n > 0 {
		a.Reserve(arenaFor(n))
		r.live.reserve(max(n, opts.Refs))
	}
	// Converting every event costs; skip it when nobody looks (the
	// comparison with the recording, or obs).
	if r.recorded || obs != nil {
		a.SetObserver(r)
	}
	r.a = a
	r.res.Device = d
	r.res.Allocator = a
	return nil
}

// kinds maps the allocator's actions to the trace kinds of the same names.
var kinds = [...]trace.Kind{
	allocator.ActAlloc:         trace.KindAlloc,
	allocator.ActFreeRequested: trace.KindFreeRequested,
	allocator.ActFreeCompleted: trace.KindFreeCompleted,
	allocator.ActSegmentAlloc:  trace.KindSegmentAlloc,
	allocator.ActSegmentFree:   trace.KindSegmentFree,
	allocator.ActSegmentMap:    trace.KindSegmentMap,
	allocator.ActSegmentUnmap:  trace.KindSegmentUnmap,
	allocator.ActOOM:           trace.KindOOM,
}

// push replays ev, the next event of the device. A free_requested waits
// for the following event (held by pointer: the caller copies it with
// keepHeld before ev's memory is reused); everything else is replayed at once, which keeps
// the trace order because only a held free_requested can precede it.
//
// The two requests nearly every event is part of, a malloc and a
// synchronous free, take a short path when none of step's rare cases
// applies; it does what step would.
func (r *deviceReplay) push(ev *trace.Event) error {
	if r.hasHold {
		r.hasHold = false
		if ev.Kind == trace.KindFreeCompleted && ev.Addr == r.held.Addr && r.plain(r.held) {
			return r.freePair(r.held, ev)
		}
		consumed, err := r.step(r.held, ev)
		if err != nil || consumed {
			return err
		}
	}
	switch ev.Kind {
	case trace.KindFreeRequested:
		r.hold(ev)
		return nil
	case trace.KindAlloc:
		if r.plain(ev) && ev.Pool.IsDefault() && !r.routed() && !r.caps.capturing() {
			return r.alloc(ev)
		}
	}
	_, err := r.step(ev, nil)
	return err
}

// peek loads the address map's slots that the next events evs of the
// device will probe first, in one loop: in a map larger than the cache
// nearly every alloc's Put and free's Take misses, and the misses of a
// loop of independent loads overlap where those of the events' replays,
// one after another, do not. Numbered events (r.numbered) are not peeked:
// their slots are an array indexed by number, and loading them ahead costs
// more than the misses it overlaps.
func (r *deviceReplay) peek(evs []trace.Event) {
	r.peeked += r.live.peek(evs)
}

// ref is ev's block number (trace.Event.Ref) when the source numbered the
// events, else 0.
func (r *deviceReplay) ref(ev *trace.Event) int32 {
	if r.numbered {
		return ev.Ref
	}
	return 0
}

// hold holds the free_requested ev until the next event of the device.
// Annotating, it gives ev its block's size now: the batch it lies in may
// be handed on before the free is replayed.
func (r *deviceReplay) hold(ev *trace.Event) {
	if r.annotate {
		if b, ok := r.live.get(ev.Addr, r.ref(ev)); ok {
			ev.BlockSize, _ = r.a.HandleSize(b.addr, b.h)
		}
	}
	r.held, r.hasHold = ev, true
}

// placed annotates the recorded alloc ev, which the model made at addr
// with handle h, or notes that the model left the recording there.
func (r *deviceReplay) placed(ev *trace.Event, addr uint64, h allocator.Handle) {
	if addr != ev.Addr {
		if r.opts.LeftAt != nil {
			r.opts.LeftAt(ev, addr)
		}
		r.leave(ev)
		return
	}
	ev.BlockSize, _ = r.a.HandleSize(addr, h)
}

// leave ends the annotation at ev, where the model left the recording.
func (r *deviceReplay) leave(ev *trace.Event) {
	r.annotate = false
	if r.opts.Left != nil {
		r.opts.Left(ev)
	}
}

// keepHeld copies the held event, if it is not a copy already, before the
// source reuses the memory it lies in.
func (r *deviceReplay) keepHeld() {
	if r.hasHold && r.held != &r.heldBuf {
		r.heldBuf = *r.held
		r.held = &r.heldBuf
	}
}

// plain reports whether step would replay ev without its rare cases: ev is
// not reconstructed, the restore is behind, no recorded segment release
// awaits attribution, and no OOM an empty_cache() may have followed
// (afterOOM).
func (r *deviceReplay) plain(ev *trace.Event) bool {
	return ev.Flags&trace.FlagReconstructed == 0 && r.restored && len(r.reclaim) == 0 && len(r.late) == 0 && r.quietOOM.Kind == trace.KindInvalid
}

// completes reports whether next is the free_completed of the
// free_requested req, right behind it, so that the two replay as one
// synchronous free (freePair).
func (r *deviceReplay) completes(req, next *trace.Event) bool {
	return next.Kind == trace.KindFreeCompleted && next.Addr == req.Addr && next.Device == req.Device && r.plain(req)
}

// alloc is step for a plain alloc in the default pools.
func (r *deviceReplay) alloc(ev *trace.Event) error {
	r.res.Events++
	r.called.request(ev)
	r.at(ev.TimeUs, ev.Stack)
	r.expectEv(ev)
	if len(r.followSegs) > 0 {
		r.follow()
	}
	addr, h, err := r.a.MallocHandle(ev.Size, ev.Stream)
	r.clearPlan()
	if err != nil || !r.live.putNumbered(ev.Addr, r.ref(ev), addr, h) {
		return r.allocRest(ev, addr, h, err)
	}
	if r.annotate {
		r.placed(ev, addr, h)
	}
	return nil
}

// allocRest is the end of alloc past its common case, the block of ev
// (addr, handle h) kept by putNumbered: a failed malloc (err), or a block
// the live map must put.
func (r *deviceReplay) allocRest(ev *trace.Event, addr uint64, h allocator.Handle, err error) error {
	if err != nil {
		if !allocator.IsOOM(err) {
			return err
		}
		if r.annotate {
			r.leave(ev)
		}
		r.oom(ev, false)
		r.live.del(ev.Addr, r.ref(ev)) // the recorded address names no block of the replay now
		return nil
	}
	r.live.put(ev.Addr, r.ref(ev), blockRef{addr, h})
	if r.annotate {
		r.placed(ev, addr, h)
	}
	return nil
}

// freePair is step for a plain free_requested ev followed by its
// free_completed next: a synchronous free.
func (r *deviceReplay) freePair(ev, next *trace.Event) error {
	r.res.Events += 2
	r.called.request(ev)
	r.at(ev.TimeUs, ev.Stack)
	r.expectEv(ev)
	r.expectEv(next)
	b, ok := r.live.take(ev.Addr, r.ref(ev))
	if !ok {
		return nil
	}
	if r.annotate {
		// ev may be a copy (held across batches): hold annotated it.
		ev.BlockSize, _ = r.a.HandleSize(b.addr, b.h)
		next.BlockSize = ev.BlockSize
	}
	return r.a.FreeHandle(b.addr, b.h)
}

func (r *deviceReplay) finish() error {
	if r.hasHold {
		r.hasHold = false
		if _, err := r.step(r.held, nil); err != nil {
			return err
		}
	}
	if err := r.applyRestore(); err != nil {
		return err
	}
	if err := r.flushLate(); err != nil {
		return err
	}
	if err := r.settleReclaim(nil); err != nil {
		return err
	}
	for range r.caps.later() {
		r.a.CountSync() // the empty_cache() of a later capture (captures.go)
	}
	r.checkPending() // the hand-off's events not yet compared
	for _, w := range r.expect[r.expectHead:] {
		if len(r.res.Mismatches) >= r.opts.MaxMismatches {
			r.res.NumMismatches++
			continue
		}
		r.mismatch(w.Seq, "recorded %s %#x size %d was not replayed", w.Kind, w.Addr, w.Size)
	}
	return nil
}

// step replays ev; next is the following event of this device (nil at the
// end). It reports whether next was consumed too.
func (r *deviceReplay) step(ev, next *trace.Event) (bool, error) {
	r.res.Events++
	if ev.Flags&trace.FlagReconstructed != 0 {
		return false, r.gatherRestore(ev)
	}
	if err := r.applyRestore(); err != nil {
		return false, err
	}
	r.at(ev.TimeUs, ev.Stack)
	a := r.a
	if ev.Kind != trace.KindAlloc && ev.Kind != trace.KindSegmentAlloc && ev.Kind != trace.KindSegmentMap {
		r.pools.fresh = allocator.SegmentInfo{} // the segment was not an alloc's (an OOM's retry)
	}
	if len(r.late) > 0 {
		if err := r.lateBefore(ev); err != nil {
			return false, err
		}
	}
	switch ev.Kind {
	case trace.KindSegmentAlloc:
		if r.opts.Recorded && r.sim != nil {
			r.sim.PlanMalloc(ev.Addr, ev.Size)
		} else if !r.parted && r.sim != nil {
			r.followSegs = append(r.followSegs, allocator.SegmentInfo{Addr: ev.Addr, Size: ev.Size})
		}
		if r.annotate && r.opts.InferPools {
			r.pools.fresh = allocator.SegmentInfo{Addr: ev.Addr, Size: ev.Size}
		}
		r.expectEv(ev)
	case trace.KindSegmentMap:
		// A malloc creates at most one expandable segment, before mapping
		// anything, and maps its base first: the first segment_map of the
		// request gives the reservation's address if one is made. Plans not
		// used are dropped after the request.
		if r.opts.Recorded && r.sim != nil {
			r.sim.PlanReserve(ev.Addr)
		}
		r.parted = true // expandable segments: reservations are not followed
		if r.annotate && r.opts.InferPools && r.pools.fresh.Size == 0 {
			r.pools.fresh = allocator.SegmentInfo{Addr: ev.Addr, Size: ev.Size, Expandable: true}
		}
		r.expectEv(ev)
	case trace.KindSegmentFree, trace.KindSegmentUnmap:
		r.quietOOM.Kind = trace.KindInvalid
		r.recFrees++
		r.segmentFreed(ev)
		if !r.rows || len(r.reclaim) > 0 {
			// With rows, only the releases after a row: they tell
			// which private pools its call found released (settle).
			r.reclaim = append(r.reclaim, *ev)
		}
		r.expectEv(ev)
	case trace.KindEmptyCache:
		if r.opts.InferEmptyCaches {
			break
		}
		if !r.rows {
			// The first row of a trace that did not say it has them: the
			// releases buffered so far are outcomes too.
			r.rows, r.reclaim = true, r.reclaim[:0]
		}
		r.reclaim = append(r.reclaim, *ev)
	case trace.KindAlloc:
		r.afterOOM()
		if err := r.settleReclaim(ev); err != nil {
			return false, err
		}
		r.expectEv(ev)
		pool := r.allocPool(ev)
		private := !pool.IsDefault()
		first := false
		if private {
			var err error
			if first, err = r.beginPool(pool, ev.Stream, r.called.before(ev)); err != nil {
				return false, err
			}
		}
		r.called.request(ev)
		if x, ok := r.caps.allocIn(pool, ev, first); ok && r.annotate && r.opts.InferPools {
			if r.res.Aliases == nil {
				r.res.Aliases = map[allocator.PoolID]allocator.PoolID{}
			}
			r.res.Aliases[x] = pool
		}
		if len(r.followSegs) > 0 {
			r.follow()
		}
		addr, h, err := a.MallocHandle(ev.Size, ev.Stream)
		a.FreeLate() // a request of 0 bytes runs no malloc
		if private {
			a.EndAllocateToPool(pool)
		}
		r.clearPlan()
		if err != nil {
			if !allocator.IsOOM(err) {
				return false, err
			}
			r.pools.fresh = allocator.SegmentInfo{}
			if r.annotate {
				r.leave(ev)
			}
			r.oom(ev, false)
			r.live.del(ev.Addr, r.ref(ev)) // the recorded address names no block of the replay now
			return false, nil
		}
		r.live.put(ev.Addr, r.ref(ev), blockRef{addr, h})
		r.allocated(ev, pool)
		if r.annotate {
			r.placed(ev, addr, h)
		}
	case trace.KindFreeRequested:
		r.called.request(ev)
		if err := r.settleReclaim(nil); err != nil {
			return false, err
		}
		r.expectEv(ev)
		paired := next != nil && next.Kind == trace.KindFreeCompleted && next.Addr == ev.Addr
		if paired {
			r.res.Events++
			r.expectEv(next)
		}
		var b blockRef
		var ok bool
		if paired {
			b, ok = r.live.take(ev.Addr, r.ref(ev))
		} else {
			b, ok = r.live.get(ev.Addr, r.ref(ev))
		}
		if !ok {
			// The alloc is not in the trace (and was not reconstructed), or it
			// failed in this replay.
			return paired, nil
		}
		if r.annotate {
			ev.BlockSize, _ = a.HandleSize(b.addr, b.h)
			if paired {
				next.BlockSize = ev.BlockSize
			}
		}
		if !paired {
			// The recording waited for cross-stream events: model them as a
			// use by another stream.
			if err := a.RecordStreamHandle(b.addr, b.h, ^ev.Stream); err != nil {
				return false, err
			}
		}
		return paired, a.FreeHandle(b.addr, b.h)
	case trace.KindFreeCompleted:
		if err := r.settleReclaim(nil); err != nil {
			return false, err
		}
		r.expectEv(ev)
		b, ok := r.live.get(ev.Addr, r.ref(ev))
		if !ok || !a.PendingHandle(b.addr, b.h) {
			// The replay keeps the block, whose number is given to
			// the next one.
			r.live.release(ev.Addr, r.ref(ev))
			return false, nil
		}
		if r.annotate {
			ev.BlockSize, _ = a.HandleSize(b.addr, b.h)
		}
		r.live.del(ev.Addr, r.ref(ev))
		r.late = append(r.late, b) // completed at the next event (late)
		return false, nil
	case trace.KindOOM:
		r.afterOOM()
		r.called.request(ev)
		if err := r.settleReclaim(ev); err != nil {
			return false, err
		}
		r.expectEv(ev)
		pool := r.oomPool(ev)
		if !pool.IsDefault() {
			if _, err := r.beginPool(pool, ev.Stream, false); err != nil {
				return false, err
			}
		}
		if len(r.followSegs) > 0 {
			r.follow()
		}
		addr, err := a.Malloc(ev.Size, ev.Stream)
		a.FreeLate()
		if !pool.IsDefault() {
			a.EndAllocateToPool(pool)
		}
		r.clearPlan()
		if err != nil {
			if !allocator.IsOOM(err) {
				return false, err
			}
			r.oom(ev, true)
			if r.opts.EmptyCacheAfterOOM && r.opts.Recorded && !r.rows && !r.a.WouldEmpty() {
				r.quietOOM = *ev
			}
			return false, nil
		}
		r.res.AvoidedOOMs++
		if r.annotate {
			r.leave(ev)
		}
		if r.recorded {
			r.checkPending()
			r.mismatch(ev.Seq, "recorded OOM of %d bytes succeeded in the replay", ev.Size)
		}
		return false, a.Free(addr)
	}
	return false, nil
}

func (r *deviceReplay) clearPlan() {
	if r.sim != nil {
		if r.following && r.sim.Plans() > 0 {
			r.parted = true // the replay did not make a segment the recording made
		}
		r.following = false
		r.sim.ClearPlan()
	}
}

func (r *deviceReplay) oom(ev *trace.Event, recorded bool) {
	var cached int64
	if !r.opts.SkipStats {
		cached = r.a.FreeCached()
	}
	r.res.OOMs = append(r.res.OOMs, OOM{Seq: ev.Seq, Size: ev.Size, Stream: ev.Stream, Stack: ev.Stack,
		FreeCached: cached, Recorded: recorded})
}

// settleReclaim attributes buffered recorded segment_free/segment_unmap
// events before the request req (nil for a non-malloc request). They belong
// to req's malloc when the model says it would reclaim memory (Recorded mode)
// or, under other settings, when the recording shows the malloc path's shape
// (an oom, or a new segment, right after the run). Otherwise they were a
// torch.cuda.empty_cache() call, replayed now. With rows, it performs the
// empty_cache rows buffered since the last request instead: the trace says
// what the program asked for; the releases buffered after each row say
// only which private pools it found released (emptyCaches).
//
// The check for an empty buffer is inlined into every request's path; the
// buffer is nearly always empty.
func (r *deviceReplay) settleReclaim(req *trace.Event) error {
	if len(r.reclaim) == 0 {
		return nil
	}
	return r.settle(req)
}

// releasesSmall reports whether the buffered releases free a small-pool
// segment: a whole segment of the small pool's size, which no large
// segment has unless the settings make large segments that small (or
// expandable segments map pages of it).
func (r *deviceReplay) releasesSmall() bool {
	conf := r.a.Conf()
	if conf.ExpandableSegments || conf.LargeSegmentSize == conf.SmallBuffer || conf.MinLargeAlloc <= conf.SmallBuffer {
		return false
	}
	for i := range r.reclaim {
		if e := &r.reclaim[i]; e.Kind == trace.KindSegmentFree && e.Size == conf.SmallBuffer {
			return true
		}
	}
	return false
}

func (r *deviceReplay) settle(req *trace.Event) error {
	if r.rows {
		// Each row, with the releases that followed it (step buffers
		// them only after a row).
		rel := r.reclaim
		for len(rel) > 0 {
			n := 1
			for n < len(rel) && rel[n].Kind != trace.KindEmptyCache {
				n++
			}
			if err := r.emptyCache(&rel[0], rel[0].Size, rel[1:n]); err != nil {
				return err
			}
			rel = rel[n:]
		}
		r.reclaim = r.reclaim[:0]
		return nil
	}
	byMalloc := false
	if req != nil {
		if r.opts.Recorded {
			small := r.releasesSmall()
			byMalloc = r.a.WouldRelease(req.Size, req.Stream, small)
			if last := &r.reclaim[len(r.reclaim)-1]; !byMalloc && last.Seq+1 < req.Seq {
				// A new segment came between: the request's pool, a
				// private one perhaps, had no block for it.
				byMalloc = r.a.WouldReleaseNew(req.Size, req.Stream, small)
			}
		} else {
			last := &r.reclaim[len(r.reclaim)-1]
			byMalloc = req.Kind == trace.KindOOM || last.Seq+1 < req.Seq
		}
	}
	if byMalloc {
		r.reclaim = r.reclaim[:0]
		return nil
	}
	first := r.reclaim[0]
	var released int64
	for i := range r.reclaim {
		released += r.reclaim[i].Size
	}
	if r.opts.EmptyCacheFound != nil {
		r.opts.EmptyCacheFound(&first, released)
	}
	err := r.emptyCache(&first, released, r.reclaim)
	r.reclaim = r.reclaim[:0]
	return err
}

// follow plans, under settings other than the recording's, the recorded
// addresses of the segments the recording made for the request about to
// be replayed, while the replay has made the same cudaMalloc and cudaFree
// calls as the recording so far: the driver, given the same calls by the
// same program, hands out the same addresses (allocator/ADDRESSES.md), and
// where equal free blocks tie, the lower address wins. Once the calls part
// (a segment the replay did not need or made on its own, a release the
// other did not make, expandable segments), the replay invents addresses,
// above the recorded ones.
func (r *deviceReplay) follow() {
	mallocs, frees := r.a.DeviceCalls()
	if mallocs != r.recMallocs || frees != r.recFrees {
		r.parted = true
	}
	if !r.parted {
		for _, s := range r.followSegs {
			r.sim.PlanMalloc(s.Addr, s.Size)
		}
		r.following = true
	}
	r.recMallocs += int64(len(r.followSegs))
	r.followSegs = r.followSegs[:0]
}

// afterOOM is called at each request (an alloc or an OOM). A program that
// catches an OOM and goes on (a smaller batch, a skipped sample) may empty
// the cache in its handler, as the OOM message advises, while the
// exception still holds the failed step's tensors: right after the OOM.
// The call leaves no event when the OOM's own flush left nothing to
// release, but PyTorch counts its synchronize (num_sync_all_streams), and
// under other settings it may release what the recording's did not. A
// recording cannot tell such a program from one that does not empty the
// cache (testdata/snapshots' oom workload), so the user says which
// (Options.EmptyCacheAfterOOM). Inferring the calls from a recording
// (Recorded, no rows), a replay then takes a program that makes a request
// after an OOM to have made that call right after it, where the recording
// allows it: the model said the call would release nothing and complete
// no free then (quietOOM), and no release came before this request (one
// is a call the inference finds itself, or a malloc's, which no call of
// the program's came before). An observer gets the row here, after the
// frees that came between.
func (r *deviceReplay) afterOOM() {
	oom := r.quietOOM
	if oom.Kind != trace.KindOOM {
		return
	}
	r.quietOOM.Kind = trace.KindInvalid
	// Nothing the call would have touched has changed since: it was a
	// synchronize that waited for nothing.
	r.a.CountSync()
	r.res.EmptyCaches++
	r.called.call()
	at := trace.Event{Seq: oom.Seq + 1, TimeUs: oom.TimeUs, Device: r.device, Kind: trace.KindEmptyCache, Stack: oom.Stack}
	if r.opts.EmptyCacheFound != nil {
		r.opts.EmptyCacheFound(&at, 0)
	}
	if r.obs != nil {
		r.out = at
		r.emitEvent(&r.out)
	}
}

// emptyCache performs a torch.cuda.empty_cache() call, stated by the row
// at, or inferred from the run of releases that at begins, which released
// released bytes in the recording; rel are the recorded releases that
// followed it, from which emptyCaches learns the private pools it found
// released. The observer gets it as an empty_cache row before the releases
// it makes, so that a trace written from the replay states its calls too;
// the comparison with the recording, which has no such row, does not see it.
func (r *deviceReplay) emptyCache(at *trace.Event, released int64, rel []trace.Event) error {
	time, stack := r.curTime, r.curStack
	r.at(at.TimeUs, at.Stack)
	if r.obs != nil {
		r.out = trace.Event{TimeUs: at.TimeUs, Kind: trace.KindEmptyCache, Size: released, Stack: at.Stack}
		r.emitEvent(&r.out)
	}
	err := r.emptyCaches(rel)
	r.at(time, stack)
	return err
}
