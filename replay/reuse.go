package replay

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/grow"
)

// Replayer replays traces as Run does, one after another, reusing the
// memory of its previous replay: the allocator of each device (its block
// arena, free IDs, address index, pools and size-class pages; see
// allocator.Allocator.Reset), the simulated device, the replay's hash maps
// and buffers, and the Result. A replay of a small snapshot (a few hundred
// events) spends more on making these, and on the garbage collection that
// follows, than on its events: a Replayer's replays allocate nearly
// nothing once it has replayed a trace of the size. It holds on to the
// memory of its largest replay so far.
//
// The Result a Run returns, and everything it holds (DeviceResult.Allocator,
// OOMs, Mismatches), is valid only until the next Run of the same Replayer,
// which reuses it: copy what must outlive it. The zero Replayer is ready to
// use. A Replayer is not safe for concurrent use; replays that run at once
// need one Replayer each.
type Replayer struct {
	x   runner
	out runResult
	// The pages of the model's arena and table of numbered blocks that
	// Prepare made, for Prefault, which may run beside Run, and the part
	// of them it has faulted in.
	arena, table grow.Pages
	blocks       int // Options.Blocks
	// The blocks of the arena and the slots of the table faulted in.
	arenaFaulted, tableFaulted int
	// nodes is the model Prepare made, for NodesAhead.
	nodes *allocator.Allocator
	// off holds the arena and the table PrepareOffHeap made, until Release.
	off *grow.OffHeap
}

// Run replays src as Run(ctx, src, opts, obs) does, with the same results,
// reusing the memory of rp's previous Run, whose Result it invalidates.
func (rp *Replayer) Run(ctx context.Context, src Source, opts Options, obs Observer) (*Result, error) {
	x := &rp.x
	x.out, x.reuse = &rp.out, true
	// Every device replay the previous Run may have touched, whether or
	// not it got into the list (an error in init leaves it out).
	x.dev0.recycle()
	for _, e := range x.extra[:x.nextra] {
		e.r.recycle()
	}
	x.nextra = 0
	return x.run(ctx, src, opts, obs)
}

// Prepare readies rp's next Run, of opts, on a goroutine of the caller's
// choosing before it: it makes the model of the Run's first device with
// its block arena for opts.Blocks live blocks, and the table of numbered
// blocks for opts.Refs (or Blocks), whose pages Prefault then faults in.
// A fresh model's thread otherwise makes them, and takes a page fault
// each time it first reaches a page of them (64 blocks of the arena, 128
// of the table): tracer import's annotation, one model of millions of
// blocks, spent about as long on those as on the model's work. Only
// Blocks, Refs and what makes the allocator (Conf, TotalMemory,
// MemoryLimit) are read; Run takes the rest of its options as ever, and
// its results are the same. Prepare and Run must not run at once.
func (rp *Replayer) Prepare(opts Options) error { return rp.prepare(opts, nil) }

// PrepareOffHeap is Prepare with the arena and the table made outside the
// Go heap (grow.MakeOff), where the collector does not count them: a guess
// of the blocks far above what the trace holds at once (tracer replay's,
// from the file's size) then costs address space, not a collector's
// headroom of a quarter of it in garbage. The caller calls Release once it
// is done with the Run and its Result.
func (rp *Replayer) PrepareOffHeap(opts Options) error {
	if rp.off == nil {
		rp.off = new(grow.OffHeap)
	}
	return rp.prepare(opts, rp.off)
}

// Release gives back the memory PrepareOffHeap made, once the Run has
// returned and Follow and Prefault are done: the model that holds it is
// dropped (the Run's Result's DeviceResult.Allocator becomes nil, its
// Stats stay), and rp's next Run makes one afresh. Without a
// PrepareOffHeap it does nothing. The unmapping, which frees every page
// the Run touched (0.4-3.5 ms of small.trace's arena on the development
// VM, at the end of tracer replay's path), runs on a goroutine of its own
// (unmapBehind); the memory is dropped from rp before Release returns.
func (rp *Replayer) Release() {
	if rp.off == nil {
		return
	}
	r := &rp.x.dev0
	for i := range rp.out.res.Devices {
		if d := &rp.out.res.Devices[i]; d.Allocator == r.a {
			d.Allocator = nil
		}
	}
	r.a, r.res.Allocator, r.live.byRef = nil, nil, nil
	rp.arena, rp.table, rp.blocks, rp.arenaFaulted, rp.tableFaulted, rp.nodes = grow.Pages{}, grow.Pages{}, 0, 0, 0, nil
	unmapBehind(rp.off)
	rp.off = nil
}

// unmapBehind gives back h's memory on a goroutine of its own; a variable
// for the tests.
var unmapBehind = func(h *grow.OffHeap) { go h.Release() }

// prepare is Prepare, with the arena and the table made in h if not nil.
func (rp *Replayer) prepare(opts Options, h *grow.OffHeap) error {
	n := opts.Blocks
	if n <= 0 {
		return nil
	}
	if opts.TotalMemory == 0 {
		opts.TotalMemory = 80 << 30
	}
	conf := opts.Conf
	if opts.MemoryLimit > 0 {
		conf.MemoryFraction = 1 // as init makes it
	}
	r := &rp.x.dev0
	rp.out.sim.Reset(opts.TotalMemory)
	a, err := r.allocator(conf, &rp.out.sim)
	if err != nil {
		return err
	}
	r.a = a
	// The arena and the table at once: the runtime clears reused memory
	// on the goroutine that allocates it.
	var wg sync.WaitGroup
	wg.Go(func() { r.live.reserveOff(max(n, opts.Refs), h) })
	rp.arena = a.ReserveOff(arenaFor(n), h)
	wg.Wait()
	rp.table = grow.PagesOf(r.live.byRef[len(r.live.byRef):])
	rp.blocks, rp.arenaFaulted, rp.tableFaulted, rp.nodes = n, 0, 0, a
	return nil
}

// NodesAhead makes the next nodes of the free sets' trees of the model
// Prepare made, for its Options.Blocks (allocator.Allocator.NodesAheadFor),
// unless some are waiting; another goroutine calls it now and then while
// the Run goes on. Without a Prepare it does nothing.
func (rp *Replayer) NodesAhead() {
	if rp.nodes != nil {
		rp.nodes.NodesAheadFor(rp.blocks)
	}
}

// Prefault faults in the first part (0 to 1) of the arena and the table
// Prepare made, in the order the model fills them, without touching them
// (grow.Pages.Populate): another goroutine may call it while the Run
// goes on, a little ahead of it, so that the pages are resident by the
// time the model first reaches them but no sooner (the memory a replay
// reaches late, at its peak of live blocks, costs nothing before). It
// reports false where the system cannot.
func (rp *Replayer) Prefault(part float64) bool {
	part = min(max(part, 0), 1)
	return rp.prefaultTo(int(part*float64(rp.blocks)), int(part*float64(rp.table.Len())))
}

// PrefaultBelow is Prefault of the memory that holds block numbers below
// n: the table's slots below n, and as many blocks of the arena, whose
// blocks the model takes about one a number, as it takes the numbers.
// (The table is longer than the arena's blocks asked for where the blocks
// are numbered in parts, replay.PartNumbers.Refs: the arena's share of the
// table's, its pages' share, fell behind the model's by a ninth.)
func (rp *Replayer) PrefaultBelow(n int) bool {
	return rp.prefaultTo(min(n, rp.blocks), n)
}

// prefaultTo faults in the arena's first blocks blocks and the table's
// first refs slots, past what it faulted in before.
func (rp *Replayer) prefaultTo(blocks, refs int) bool {
	ok := true
	// The arena's room beyond the blocks asked for is for the free blocks
	// between them, which few traces make: it faults in as reached.
	if blocks > rp.arenaFaulted {
		ok = rp.arena.Populate(rp.arenaFaulted, blocks)
		rp.arenaFaulted = blocks
	}
	if refs > rp.tableFaulted {
		ok = rp.table.Populate(rp.tableFaulted, refs) && ok
		rp.tableFaulted = refs
	}
	return ok
}

// Follow faults in the memory Prepare made as a Run reaches it, on a
// goroutine beside the Run: each time wake says that top, the greatest
// block number handed to the Run, has grown, up to ahead numbers past it,
// or top past it while top is less (PrefaultBelow: a trace whose numbers
// stay low, with few blocks live, has no more faulted in than twice what
// it reaches), and with nodes the free sets' next tree nodes
// (NodesAhead). It returns once stop is closed.
func (rp *Replayer) Follow(top *atomic.Int32, ahead int, nodes bool, wake, stop <-chan struct{}) {
	populate := true
	for {
		select {
		case <-stop:
			return
		case <-wake:
			t := int(top.Load())
			if populate && !rp.PrefaultBelow(t+min(ahead, max(t, followMin))) {
				populate = false // not on this system
			}
			if nodes {
				rp.NodesAhead()
			}
		}
	}
}

// followMin is the least lead of Follow's over the numbers handed on.
const followMin = 1 << 10

// extraDevice is the replay of a device besides the first, and its
// SimDevice, kept by a Replayer.
type extraDevice struct {
	r   deviceReplay
	sim allocator.SimDevice
}

// another returns the replay of a device besides the first, zero or
// recycled, and where to make its SimDevice (nil: init makes a new one).
func (x *runner) another() (*deviceReplay, *allocator.SimDevice) {
	if !x.reuse {
		return new(deviceReplay), nil
	}
	if x.nextra == len(x.extra) {
		x.extra = append(x.extra, new(extraDevice))
	}
	e := x.extra[x.nextra]
	x.nextra++
	return &e.r, &e.sim
}

// recycle readies r, which an earlier Run used, for init: every field is
// zero, as init expects, but for the allocator, which init resets, and
// the maps and slices, emptied with their memory kept. Fields not named
// here are zero, so a field added to deviceReplay is recycled as zero
// unless it is named.
func (r *deviceReplay) recycle() {
	r.live.clear()
	clear(r.restoreSegs) // their blocks
	r.restoreEvs.reset()
	clear(r.private)
	clear(r.pools.seen)
	clear(r.pools.last)
	clear(r.res.Mismatches) // their messages
	*r = deviceReplay{
		a:           r.a,
		live:        r.live,
		restoreSegs: r.restoreSegs[:0],
		restoreEvs:  r.restoreEvs,
		reclaim:     r.reclaim[:0],
		followSegs:  r.followSegs[:0],
		expect:      r.expect[:0],
		pools:       poolRoute{seen: r.pools.seen, last: r.pools.last},
		private:     r.private[:0],
		res:         DeviceResult{OOMs: r.res.OOMs[:0], Mismatches: r.res.Mismatches[:0]},
	}
}

// allocator returns the allocator of r for conf on dev: a new one, or the
// one of r's earlier replay, reset.
func (r *deviceReplay) allocator(conf allocator.Conf, dev allocator.Device) (*allocator.Allocator, error) {
	if r.a == nil {
		return allocator.New(conf, dev)
	}
	if err := r.a.Reset(conf, dev); err != nil {
		return nil, err
	}
	return r.a, nil
}
