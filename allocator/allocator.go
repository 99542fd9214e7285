package allocator

import (
	"errors"
	"fmt"

	"github.com/tracer-dev/tracer/internal/grow"

	"github.com/tracer-dev/tracer/internal/addrmap"
)

// blockID indexes Allocator.blocks; 0 means "no block".
type blockID int32

// poolIdx indexes Allocator.pools; expIdx indexes Allocator.expTab (0: none).
// Blocks hold indices, not pointers, so the arena has no pointers for the
// garbage collector to scan and copying a block needs no write barrier.
type (
	poolIdx int32
	expIdx  int32
)

// block is PyTorch's Block (§1). Blocks live in an arena indexed by blockID so
// the hot path allocates nothing and the GC scans no pointer graph. A block
// is 64 bytes, one cache line (the arena is page-aligned once it is large):
// the malloc and free paths touch several blocks each, and a block split
// across two lines costs a second miss. allocFound's split writes every
// field of its new block into a slot that may hold an old one: a field
// added here is written there too.
type block struct {
	addr      uint64
	size      int64
	requested int64
	stream    uint64
	gcBase    uint64
	prev      blockID
	next      blockID
	pool      poolIdx // Allocator.pools
	exp       expIdx  // Allocator.expTab; non-zero inside an expandable segment
	events    int32   // event_count: outstanding cross-stream events
	allocated bool
	mapped    bool
	live      bool // false on the arena's free list
	used      bool // stream_uses is not empty: record_stream named other streams (Allocator.uses)
}

func (b *block) isSplit() bool { return b.prev != 0 || b.next != 0 }

// Action is what an allocator Event did, named as PyTorch's trace actions.
type Action uint8

const (
	ActAlloc Action = iota + 1
	ActFreeRequested
	ActFreeCompleted
	ActSegmentAlloc
	ActSegmentFree
	ActSegmentMap
	ActSegmentUnmap
	ActOOM
)

var actionNames = [...]string{"", "alloc", "free_requested", "free_completed", "segment_alloc",
	"segment_free", "segment_map", "segment_unmap", "oom"}

func (a Action) String() string {
	if int(a) < len(actionNames) && a != 0 {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Event is one allocator trace entry (§13) with PyTorch's field conventions:
// Size is the requested size for alloc/free_*, the segment or range size for
// segment_*, the rounded request for oom, whose Addr is the device free bytes.
// BlockSize is the block's real size for alloc/free_* (0 otherwise).
type Event struct {
	Action    Action
	Addr      uint64
	Size      int64
	Stream    uint64
	Pool      PoolID
	BlockSize int64
}

// Observer receives every event the allocator emits, in emission order. The
// pointer is only valid during the call.
type Observer interface {
	AllocatorEvent(e *Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(e *Event)

// AllocatorEvent calls f(e).
func (f ObserverFunc) AllocatorEvent(e *Event) { f(e) }

// Allocator is one DeviceCachingAllocator: the caching allocator of one device.
// It is not safe for concurrent use.
type Allocator struct {
	conf Conf
	dev  Device

	blocks  []block
	freeIDs []blockID
	// active indexes the allocated and pending-free blocks by address, for
	// the calls that name a block by its address (Free, RecordStream, ...).
	// It is built on the first such call and kept from then on (indexed); a
	// caller that frees through handles (MallocHandle, FreeHandle) never
	// needs it and saves a hash-map update per malloc and free.
	active   addrmap.Map[blockID]
	indexed  bool
	small    *blockPool
	large    *blockPool
	private  map[PoolID]*privatePool
	freeable map[PoolID]*privatePool // the private pools without uses (graph_pools_freeable): the ones empty_cache visits
	captures []capture
	exps     []*expSegment // the live ones, in no order; expIx indexes them
	expIx    expIndex
	pools    []*blockPool  // every pool, by poolIdx
	expTab   []*expSegment // every expandable segment ever made, by expIdx; [0] is nil (empty before the first)
	uses     streamUses
	pages    pageSlab // the size-class pages of every pool's free set

	// deadPools are the block pools of the private pools that EmptyCache
	// deleted, for privateBlocks: the block pools a run holds are then as
	// many as it has alive at once.
	deadPools []poolIdx
	// deadPrivates are the private pools EmptyCache deleted, for
	// newPrivate.
	deadPrivates []*privatePool

	// pending holds blocks with outstanding events, in free order (the per-stream
	// event queues of §8, flattened).
	// A processed block leaves a 0 there until a compaction (pendDead
	// counts them), and pendAt, by block id, finds a block's place (an
	// entry is valid where pending agrees with it).
	pending  []blockID
	pendAt   []int32
	pendDead int
	done     int       // pending blocks whose events completed (events < 0)
	doneIDs  []blockID // those blocks, in the order they completed
	pendPos  []int32   // ProcessEvents' scratch
	// late are pending blocks whose events complete while the next malloc
	// runs, in the order they complete (CompleteLate).
	late []lateBlock
	// activeApart says Active and ActiveBytes are kept on their own (see
	// activeStats): a block has been pending, or Restore installed them.
	activeApart bool

	// roundMask is the quantum minus 1 when no roundup_power2_divisions
	// apply (round_size is then a round-up to the quantum), else -1.
	roundMask int64

	limit    int64 // allowed_memory_maximum; 0 = no limit
	totalMem int64 // total_allocated_memory
	stats    Stats
	obs      Observer
	ev       Event
	sink     sinkState // an EventSink's, when set (sink.go)
	observed bool      // obs or sink.to is set: events are reported

	// briefOOMs says an OOM's error skips the private pools' free bytes
	// (BriefOOMs).
	briefOOMs bool
	// noBlockStats says the mallocs' and frees' common cases leave the
	// block statistics alone (SkipBlockStats).
	noBlockStats bool
}

// ErrOOM is wrapped by the error Malloc returns when PyTorch would raise
// torch.OutOfMemoryError (§12).
var ErrOOM = errors.New("CUDA out of memory")

// OOMError is the out-of-memory error of one Malloc, with PyTorch's message.
// The message is made when asked for: a replay of a run that hit its limit
// over and over counts its OOMs and never prints most of them.
type OOMError struct {
	Size       int64 // the request
	AllocSize  int64 // what "Tried to allocate" reports (the segment size)
	DeviceFree int64
	// what the message reports besides
	total, limit, allocated, private, reserved int64
	msg                                        string // a fixed message instead
}

// Error is PyTorch's message (c10/cuda/CUDACachingAllocator.cpp, malloc).
func (e *OOMError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	allowed := ""
	if e.limit > 0 {
		allowed = FormatSize(e.limit) + " allowed; "
	}
	privTxt := ""
	if e.private > 0 {
		privTxt = "with " + FormatSize(e.private) + " allocated in private pools (e.g., CUDA Graphs), "
	}
	return fmt.Sprintf("CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of %s of which %s is free. %s"+
		"Of the allocated memory %s is allocated by PyTorch, %sand %s is reserved by PyTorch but unallocated. "+
		"If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "+
		"See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
		FormatSize(e.AllocSize), FormatSize(e.total), FormatSize(e.DeviceFree), allowed,
		FormatSize(e.allocated), privTxt, FormatSize(e.reserved-e.allocated-e.private))
}
func (e *OOMError) Unwrap() error { return ErrOOM }

// New returns an allocator with configuration conf on dev. The memory limit of
// conf.MemoryFraction is applied once the device total is known (§14).
func New(conf Conf, dev Device) (*Allocator, error) {
	if err := conf.Validate(); err != nil {
		return nil, err
	}
	// The allocator, its default pools and room for their pointers, in one
	// allocation (see newPools).
	f := new(struct {
		a     Allocator
		pools [2]blockPool
		refs  [2]*blockPool
	})
	a := &f.a
	a.conf, a.dev, a.blocks = conf, dev, make([]block, 1, 16)
	a.roundMask = conf.MinBlockSize - 1
	for _, d := range conf.RoundupDivisions {
		if uint64(d) > 1 {
			a.roundMask = -1
		}
	}
	a.pools = f.refs[:0]
	a.small, a.large = a.addPools([2]*blockPool{&f.pools[0], &f.pools[1]})
	a.stats.MaxSplitSize = conf.MaxSplitSize
	if conf.MemoryFraction < 1 {
		_, total, err := dev.MemInfo()
		if err != nil {
			return nil, fmt.Errorf("allocator: memory info: %w", err)
		}
		a.limit = fractionLimit(conf.MemoryFraction, total)
	}
	return a, nil
}

// fractionLimit is allowed_memory_maximum, ⌊f × total⌋, for f < 1. Where it
// is 0 (per_process_memory_fraction:0, or a fraction too small), PyTorch
// refuses every new segment; a limit of 0 means none here, and one byte,
// which every segment passes, refuses them all alike.
func fractionLimit(f float64, total int64) int64 {
	return max(int64(f*float64(total)), 1)
}

// Conf returns the allocator's configuration.
func (a *Allocator) Conf() Conf { return a.conf }

// SetObserver makes o receive every later event; nil stops reporting. An
// allocator reports to an Observer or to an EventSink (SetEventSink), not
// both: setting one removes the other, after handing the sink its events.
func (a *Allocator) SetObserver(o Observer) {
	a.SetEventSink(nil, nil)
	a.obs = o
	a.observed = o != nil
}

// SetMemoryLimit sets the per-process limit in bytes
// (set_per_process_memory_fraction: pass floor(fraction × total)); 0 removes it.
func (a *Allocator) SetMemoryLimit(bytes int64) { a.limit = bytes }

// BriefOOMs makes the OOM errors that follow short ("CUDA out of memory.
// Tried to allocate X."), for a caller that prints none, such as a replay:
// PyTorch's full message sums the free blocks of every private pool, a walk
// of all of them at each OOM, and a replay on a device smaller than the
// recording's may run out of memory at every request past the limit, with
// thousands of CUDA graphs' pools cached. Reset turns it off.
func (a *Allocator) BriefOOMs(on bool) { a.briefOOMs = on }

// SkipBlockStats spares the common cases of MallocHandle and FreeHandle
// their updates of the block statistics (allocations, active, requested,
// inactive split and oversize allocations, counts and bytes), a seventh of
// their work, for a caller that reads none: a replay that only annotates
// a recording's block sizes. Stats, FreeCached and the figures of an OOM's
// full message are then meaningless; nothing the allocator decides reads
// them. Reset turns it off.
func (a *Allocator) SkipBlockStats(on bool) { a.noBlockStats = on }

// MemoryLimit returns the limit in bytes, 0 if none.
func (a *Allocator) MemoryLimit() int64 { return a.limit }

func (a *Allocator) gcEnabled() bool { return a.limit > 0 && a.conf.GCThreshold > 0 }

// emit reports an event to the observer or the sink, if any. It is small
// enough to be inlined, so an unobserved allocator (a replay nobody watches)
// pays one comparison per event instead of a call that builds the event.
func (a *Allocator) emit(act Action, addr uint64, size int64, stream uint64, pool *blockPool, bsize int64) {
	if a.observed {
		a.emitSlow(act, addr, size, stream, pool, bsize)
	}
}

func (a *Allocator) emitSlow(act Action, addr uint64, size int64, stream uint64, pool *blockPool, bsize int64) {
	if a.sink.to != nil {
		a.sinkEvent(act, addr, size, stream, pool, bsize)
		return
	}
	a.ev = Event{Action: act, Addr: addr, Size: size, Stream: stream, BlockSize: bsize}
	if pool != nil {
		a.ev.Pool = pool.id()
	}
	a.obs.AllocatorEvent(&a.ev)
}

func (a *Allocator) newBlock(addr uint64, size int64, stream uint64, pool *blockPool) blockID {
	if len(a.freeIDs) == 0 && len(a.blocks) == cap(a.blocks) {
		a.blocks = grow.Double(a.blocks, 0)
	}
	id := a.zeroBlock()
	// The slot is zero: set only what differs, rather than copying a whole
	// block literal.
	b := &a.blocks[id]
	b.addr, b.size, b.stream, b.pool = addr, size, stream, pool.idx
	b.mapped, b.live = true, true
	return id
}

// zeroBlock returns a zero block slot of the arena, a deleted block's or
// one past its length, which the caller has made room for.
func (a *Allocator) zeroBlock() blockID {
	id := a.takeSlot()
	a.blocks[id] = block{} // a Reset leaves old blocks past the length
	return id
}

// takeSlot returns a block slot of the arena, a deleted block's (zero:
// deleteBlock cleared it) or one past its length (what a Reset left
// there, or zero), which the caller has made room for and writes whole.
func (a *Allocator) takeSlot() blockID {
	if n := len(a.freeIDs); n > 0 {
		id := a.freeIDs[n-1]
		a.freeIDs = a.freeIDs[:n-1]
		return id
	}
	n := len(a.blocks)
	a.blocks = a.blocks[:n+1]
	return blockID(n)
}

func (a *Allocator) deleteBlock(id blockID) {
	a.blocks[id] = block{}
	a.freeIDs = append(a.freeIDs, id)
}

func (a *Allocator) key(id blockID) freeKey {
	b := &a.blocks[id]
	return freeKey{stream: b.stream, size: b.size, addr: b.addr, id: id}
}

func (a *Allocator) ukey(id blockID) freeKey {
	b := &a.blocks[id]
	return freeKey{stream: b.stream, addr: b.addr, id: id}
}

// roundSize is conf.roundSize, inlined when no divisions apply: a request is
// at least 1 byte, which rounds up to the quantum.
func (a *Allocator) roundSize(n int64) int64 {
	if m := a.roundMask; m >= 0 {
		return (n + m) &^ m
	}
	return a.conf.roundSize(n)
}

// insertFree is insert_into_blocks: the block enters its pool's free set and
// its GC age restarts.
func (a *Allocator) insertFree(id blockID) {
	b := &a.blocks[id]
	a.pools[b.pool].insert(b, id)
}

// insert is insertFree of block b (id), which belongs to p.
func (p *blockPool) insert(b *block, id blockID) {
	b.gcBase = p.gcClock
	p.blocks.ReplaceOrInsert(freeKey{stream: b.stream, size: b.size, addr: b.addr, id: id})
}

func (a *Allocator) removeFree(id blockID) {
	a.pools[a.blocks[id].pool].blocks.Delete(a.key(id))
}

// lateBlock is a block of CompleteLate and its address, which tells it from
// a block made later under its id.
type lateBlock struct {
	id   blockID
	addr uint64
}

// activeID returns the allocated or pending-free block at addr, 0 if none.
func (a *Allocator) activeID(addr uint64) blockID {
	a.index()
	id, _ := a.active.Get(addr)
	return id
}

// index builds the address index of the active blocks if it is not kept yet,
// and keeps it from then on.
func (a *Allocator) index() {
	if a.indexed {
		return
	}
	a.indexed = true
	for id := blockID(1); int(id) < len(a.blocks); id++ {
		if b := &a.blocks[id]; b.live && (b.allocated || b.events != 0) {
			a.active.Put(b.addr, id)
		}
	}
}

// Handle names an allocated block, as MallocHandle returns it, for
// FreeHandle. It is an index into the allocator's block arena, valid while
// the block stays allocated; the zero Handle names no block.
type Handle int32

// handleAt returns the block h names if it is the allocated block at addr,
// else 0. An active block is the only one at its address, so it is then the
// block an address lookup of addr would find.
func (a *Allocator) handleAt(addr uint64, h Handle) blockID {
	if a.handleBlock(addr, h) != nil {
		return blockID(h)
	}
	return 0
}

// handleBlock is handleAt returning the block itself (nil for none), for
// a caller that reads it: no second bounds check of the arena.
func (a *Allocator) handleBlock(addr uint64, h Handle) *block {
	if h <= 0 || int(h) >= len(a.blocks) {
		return nil
	}
	if b := &a.blocks[h]; b.allocated && b.addr == addr {
		return b
	}
	return nil
}

// activeAt is handleAt for an allocated or pending-free block.
func (a *Allocator) activeAt(addr uint64, h Handle) blockID {
	if h <= 0 || int(h) >= len(a.blocks) {
		return 0
	}
	if b := &a.blocks[h]; b.live && (b.allocated || b.events != 0) && b.addr == addr {
		return blockID(h)
	}
	return 0
}

// HandleSize is BlockSize for the block at addr that MallocHandle returned
// with h, without an address lookup while h still names it: the replay
// that annotates a recording's block sizes asks it of every alloc and
// free.
func (a *Allocator) HandleSize(addr uint64, h Handle) (int64, bool) {
	if id := a.activeAt(addr, h); id != 0 {
		return a.blocks[id].size, true
	}
	return a.BlockSize(addr)
}

// MallocSize is HandleSize of the block that MallocHandle has just
// returned with h, not 0, before anything else changes the allocator: its
// size, without HandleSize's checks (small enough to inline), for the
// replay that annotates the size of each block it makes.
func (a *Allocator) MallocSize(h Handle) int64 { return a.blocks[h].size }

// AllocatedSize is HandleSize's common case, small enough to inline: the
// size of the allocated block at addr that h names; false if h names none
// (HandleSize then answers).
func (a *Allocator) AllocatedSize(addr uint64, h Handle) (int64, bool) {
	if b := a.handleBlock(addr, h); b != nil {
		return b.size, true
	}
	return 0, false
}

// BlockSize returns the size of the allocated or pending block at addr.
func (a *Allocator) BlockSize(addr uint64) (int64, bool) {
	id := a.activeID(addr)
	ok := id != 0
	if !ok {
		return 0, false
	}
	return a.blocks[id].size, true
}
