package torchsnap

import (
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracer-dev/tracer/internal/cputime"
	"github.com/tracer-dev/tracer/trace"
)

// Parallel decoding of trace lists.
//
// A large snapshot is almost all trace entries: the items of one list per
// device, which CPython writes as batches (MARK entry… APPENDS, or entry
// APPEND for a batch of one), each entry a dict (EMPTY_DICT MEMOIZE MARK
// key value … SETITEMS). When the sequential machine has appended the first
// batch to a trace list (so that the keys and action strings are in the
// memo) and enough of the file is left, it hands the rest of the list to a
// region:
//
//   - the list is cut into chunks at batch boundaries, walking the opcodes
//     exactly, by their lengths and MARK depth, without decoding them, so
//     that each chunk knows its first event (its slots in the event store
//     are reserved then) and the memo index of its first MEMOIZE. The
//     workers walk their own chunks, found by a byte search and checked in
//     order (parallelWalk); should that cut fail, a walker goroutine reads
//     the file ahead (ReadAt) into chunk buffers and walks it alone (walk);
//   - workers, one per core, decode chunks into events, each with tables
//     of its own: values memoized in its chunk are its own, values from
//     before the region are read from a frozen view of the memo, and
//     references to earlier chunks stay symbolic (memo slots), since those
//     may still be decoding;
//   - the calling goroutine commits the chunks in order: it interns the
//     chunk's new strings, frames and stacks (in the order the sequential
//     machine would have), resolves the symbolic references through the
//     memo committed so far, stores the chunk's memo slots and rewrites the
//     chunk's stack ids.
//
// The workers accept only the subset of opcodes CPython emits for trace
// entries of the snapshot schema (with frames lists and frame dicts). At
// anything else (a key or action string from an earlier chunk, an unknown
// action, a pool id, a field that would not convert, an opcode outside the
// subset) the region ends just before that entry, and the sequential machine
// goes on from there, with the machine in the state the opcodes one by one
// would have left: the events of finished batches appended to the list, those
// of the open batch on the stack above its MARK. The region never reports an
// error itself; the sequential machine meets any error at the same offset as
// it would have without regions. Should the commit meet something the
// workers could not check (a symbolic reference that is not what its place
// needs), the decode starts over, sequentially (errParFallback).

// regionEvents counts the events decoded by regions (for tests).
var regionEvents atomic.Int64

// regionItemsEntries counts the entries regions decoded by collecting their
// items (itemsEntry), not on flatEntry's path (for tests).
var regionItemsEntries atomic.Int64

// chunkRoom counts the bytes made for regions' chunk buffers (for tests).
var chunkRoom atomic.Int64

// walkFailures counts the parallel walks that failed to cut a region (for
// tests).
var walkFailures atomic.Int64

// commitHook, when set, runs before each commit (tests).
var commitHook func(*region)

// errParFallback makes ReadFile decode the file again without regions.
var errParFallback = errors.New("torchsnap: parallel decode fell back")

// parSource is a file the decoder may read anywhere.
type parSource struct {
	ra   io.ReaderAt
	size int64
	// serialWalk: a parallel walk failed to cut the file (parallelWalk), so
	// later regions walk it serially.
	serialWalk bool
	// offHeap puts the events outside the Go heap (ReadFileMapped), and
	// scratch, if not empty, their packed records in a file there
	// (ReadFileMappedIn).
	offHeap bool
	scratch string
	// follow, if not nil, is handed the events as they are packed
	// (ReadFileMappedFollowed).
	follow func([]trace.Event)
}

// Tunables (variables so that tests can make regions of small inputs).
var (
	parMinFile  int64 = 2 << 20   // smaller files are decoded sequentially
	parMinLeft  int64 = 512 << 10 // a region starts only with this much of the file left
	parChunkMin       = 64 << 10  // chunk buffer size bounds
	parChunkMax       = 2 << 20
	parMaxEntry       = 64 << 20 // an entry longer than this ends the region
	parWorkers        = 0        // 0: GOMAXPROCS
	// parSerial makes regions walk their bytes on one goroutine, as when a
	// parallel walk failed (tests run both).
	parSerial = false
	// With fewer cores, regions would cost more than they save: the walk
	// (about a third of the sequential machine's time) and the commit come
	// on top of the decoding.
	parMinWorkers = 4
)

func regionWorkers() int {
	if parWorkers > 0 {
		return parWorkers
	}
	return runtime.GOMAXPROCS(0)
}

// Value kinds local to a region worker (never stored in the builder).
const (
	vLStr   = vMark + 1 + iota // i indexes pworker.strs
	vLList                     // i indexes pworker.lists
	vLFrame                    // i indexes pworker.frames
	vExt                       // i is a memo slot, resolved at commit (a list from before the region, or anything from an earlier chunk)
	vOpen                      // the entry dict being decoded
)

// chunk is one piece of a region: buf[:end] holds its opcodes, buf[0] at file
// offset off.
type chunk struct {
	buf        []byte
	off        int64
	end        int
	entries    int
	firstEvent int64
	memoBase   uint64
	in         bool // a batch (MARK) is open at the start
	pending    int  // entries of that batch before the chunk
	dst        [][]cev
	recs       []srec // where not nil, the workers write the events here (reserve)
	done       chan struct{}
	res        *chunkResult

	// Of the parallel walk (parallelWalk); buf, off and end are set by
	// sequence, once the chunk is known to start where its predecessor
	// ended.
	raw           []byte // the bytes read, raw[0] at file offset rawOff
	rawOff        int64
	seg, segEnd   int64 // the nominal part of the file the chunk starts in
	prev          *chunk
	seqd          chan struct{} // closed when next is set
	next          seqState      // the state after this chunk, for the next
	dead          bool          // not part of the region: skip it
	empty, failed bool          // no batch starts in the segment; the walk gave up
	start, stop   int64         // file offsets: the walk's first item, and where it stopped
	memos         int
	ended         bool // the region ends at stop (the list ended, or an item the walk cannot pass)
	endIn         bool // batch state there
	endPending    int
}

// seqState is the parallel walk's state between two chunks: where the next
// live chunk must start, its first event and memo slot, and whether the
// region is over.
type seqState struct {
	off   int64
	event int64
	memo  uint64
	over  bool
}

// chunkResult is a worker's decoding of a chunk, in the worker's tables.
type chunkResult struct {
	n       int  // entries decoded (all, unless stopped)
	stopped bool // entry n could not be decoded here: the region ends before it
	stopOff int  // its offset in buf
	in      bool // batch state before entry n (or at the end)
	pending int
	memo    wmemo // slots memoized before entry n, from memoBase on
	strs    []string
	frames  []trace.Frame
	lists   []wlist
	stacks  []wstack
	// items holds the frames of lists, each list's a slice of it: one
	// buffer a result reuses from chunk to chunk, rather than a slice per
	// list (a real training run's snapshot has a new frames list in most
	// entries, whose slices made most of a large import's garbage).
	items []value
	panic bool
}

type wlist struct {
	frames []value // vFrame, vLFrame or vExt
	stack  int32   // local stack id, trace.NoStack, or -2 before its first use
}

type wstack struct {
	ext    uint64  // memo slot of the list, when frames is nil
	frames []value // vFrame, vLFrame or vExt
	isExt  bool
}

// regionView is what workers may read of the builder: frozen when the region
// starts, and not written until it ends.
type regionView struct {
	strs     []string
	strIdx   map[string]int32
	frameIdx map[trace.Frame]int32
	memoK    [][]vkind
	memoV    [][]int32
	memoN    uint64 // the region's first memo slot
}

// tryRegion runs a region over the trace list at the top of the stack, just
// after an APPENDS or APPEND to it. It returns false if it did nothing.
func (u *unpickler) tryRegion() (bool, error) {
	b := u.b
	if u.par == nil || len(u.stack) == 0 || b.memo.sparse != nil || regionWorkers() < parMinWorkers {
		return false, nil
	}
	top := u.stack[len(u.stack)-1]
	if top.k != vList {
		return false, nil
	}
	o := b.lists.at(top.i)
	if len(o.vals) != 0 || o.derived || o.evN == 0 || o.evLo+o.evN != b.events.n {
		return false, nil
	}
	start := u.offset()
	if u.par.size-start < parMinLeft {
		return false, nil
	}
	// Cheap check that a batch or an entry follows.
	if u.end-u.pos < 4 {
		u.fill(min(4, len(u.buf)))
	}
	if u.end-u.pos >= 4 {
		p := u.buf[u.pos:]
		if !(p[0] == opMark && p[1] == opEmptyDict) && !(p[0] == opEmptyDict && p[1] == opMemoize) && p[0] != opFrame {
			return false, nil
		}
	}
	u.stopAhead() // the segments' blocks are behind: the cores are the region's
	u.collectHead()
	r := newRegion(u, start)
	span := RegionSpan{Off: start, Start: time.Now(), StartCPU: cputime.Process(), StartThread: cputime.Thread()}
	end, err := r.run()
	if err != nil {
		return false, err
	}
	if end.events == 0 && end.off == start {
		r.finish()
		return false, nil
	}
	defer func() {
		span.End, span.Stop, span.StopCPU = end.off, time.Now(), cputime.Process()
		b.regions = append(b.regions, span)
	}()
	r.finish()
	regionEvents.Add(end.events)
	// The state the opcodes one by one would have left.
	o = b.lists.at(top.i)
	o.evN += end.events - int64(end.pending)
	if end.in {
		u.marks = append(u.marks, len(u.stack))
		for i := int64(end.pending); i > 0; i-- {
			u.stack = append(u.stack, value{vEvent, b.events.n - i})
		}
	} else if end.pending > 0 {
		return false, errParFallback // an entry without its APPEND: the walker never ends there
	}
	u.openAt(end.off)
	return true, nil
}

// headCollections counts collectHead's collections (for tests).
var headCollections atomic.Int64

// collectHead collects the garbage of the decode's head before its first
// region, where the file is mid-size (its records go to a scratch file):
// the blocks-ahead workers' pieces, the read-ahead's buffers, the slabs
// and memo chunks made ahead and not taken. The collector's goal is then
// far above the heap (the import decodes at GOGC 400, paceDecode), so
// without a collection here the region's chunk buffers, workers' tables
// and memo are all new memory beside that garbage, a quarter of such a
// decode's peak; after it they reuse it. A larger file's decode is left
// as it was: its head's garbage is a small part of its peak.
func (u *unpickler) collectHead() {
	if u.headCollected || u.par.scratch == "" || u.par.size > ScratchMax {
		return
	}
	u.headCollected = true
	runtime.GC()
	headCollections.Add(1)
}

// regionSlack is how many chunks a mid-size file's region (its records
// in a scratch file) cuts beyond one a worker before the committer takes
// the oldest: a decoded chunk waiting for its commit holds its worker's
// result (its memo slots, strings and frames lists) and its events,
// unpacked, in the store's memory, and where the commits lag, the
// channels alone let two a worker wait (on 16 cores, 4 MiB of a 20 MB
// file's decode). Four keep every worker busy while the committer catches
// up. A larger file's decode, within twice the file already, is left as
// it was.
const regionSlack = 4

// regionEnd is where a region stopped.
type regionEnd struct {
	off     int64 // file offset where the sequential machine goes on
	events  int64 // events the region decoded
	in      bool  // a batch is open there
	pending int   // events of it
}

type region struct {
	u       *unpickler
	b       *builder
	start   int64
	view    regionView
	cancel  chan struct{}
	jobs    chan *chunk       // to the workers
	results chan *chunkResult // committed, for reuse
	order   chan *chunk       // to the committer, in order
	free    chan []byte
	// slots holds a token for each chunk cut and not yet taken by the
	// committer (regionSlack).
	slots chan struct{}
	wg    sync.WaitGroup
	fixes sync.WaitGroup // the committed chunks' fixStacks
	// The committed chunks to pack (pack.go), in order, and closed when the
	// store's packer has packed them; nil where the events are not packed.
	packq      chan packJob
	packDone   chan struct{}
	recFree    chan []srec // records buffers the packer gave back (recChunk)
	recMu      sync.Mutex
	recMaps    map[*srec][]srec // the mapped records buffers, by their first record
	walkEnd    regionEnd        // set by the walker before it closes order
	walkErr    error
	csize      int
	firstEvent int64 // the store's size when the region started
	// Of the parallel walk: closed (once, by sequence) when the region's
	// end is known, so that no more chunks are cut; mismatch is set when
	// the end came from a failed cut.
	stopWalk     chan struct{}
	stopWalkOnce sync.Once
	mismatch     bool

	// The committer's additions to the string and frame tables: the
	// workers read the builder's maps, which stay unchanged until finish.
	strNew   map[string]int32
	frameNew map[trace.Frame]int32

	// memos has memo chunks made and faulted in by prepareMemos for the
	// commits (memo.made), until memosStop is closed.
	memos     chan memoPair
	memosStop chan struct{}
	memosDone chan struct{}
}

func newRegion(u *unpickler, start int64) *region {
	b := u.b
	workers := regionWorkers()
	left := u.par.size - start
	// Sixteen chunks a worker: the workers+2 buffers, each a chunk and its
	// margin (scanMargin), are held through the decode, and at eight they
	// came to a third of a mid-size file's bytes.
	csize := int(min(int64(parChunkMax), max(int64(parChunkMin), left/int64(16*workers))))
	r := &region{u: u, b: b, start: start, cancel: make(chan struct{}),
		jobs: make(chan *chunk, 2*workers), order: make(chan *chunk, 2*workers+4),
		free: make(chan []byte, workers+4), results: make(chan *chunkResult, 2*workers+8), csize: csize,
		strNew: map[string]int32{}, frameNew: map[trace.Frame]int32{}, stopWalk: make(chan struct{})}
	// A larger file's region is bounded by its channels alone, as before
	// (regionSlack).
	slack := 2*workers + 8
	if u.par.scratch != "" && u.par.size <= ScratchMax {
		slack = regionSlack
	}
	r.slots = make(chan struct{}, workers+slack)
	r.view = regionView{strs: b.strs, strIdx: b.strIdx, frameIdx: b.frameIdx,
		memoK: append([][]vkind(nil), b.memo.k...), memoV: append([][]int32(nil), b.memo.v...), memoN: b.memo.n}
	// A buffer is held by a chunk from its cut to the end of its decoding
	// (release), so that one per worker and a couple for the walker to cut
	// ahead with keep every worker busy.
	for range workers + 2 {
		r.free <- nil
	}
	r.firstEvent = b.events.n
	b.events.packAll(false)
	if b.events.mapped != nil && !b.events.packStop {
		r.packq, r.packDone = make(chan packJob, 2*workers+4), make(chan struct{})
		r.recFree, r.recMaps = make(chan []srec, 4*workers+16), map[*srec][]srec{}
		go b.events.packer(r.packq, r.packDone)
	}
	// The store's current chunk must not move while workers write into
	// reservations in it.
	b.events.fix()
	r.wg.Add(1 + workers)
	if parSerial || u.par.serialWalk {
		go r.walk()
	} else {
		go r.parallelWalk()
	}
	for range workers {
		go r.work()
	}
	r.memos, r.memosStop, r.memosDone = make(chan memoPair), make(chan struct{}), make(chan struct{})
	b.memo.made = r.memos
	go r.prepareMemos()
	return r
}

// prepareMemos makes memo chunks for the commits, each touched once a
// page, so that their page faults and clearing (a slot or two a trace
// entry, 5 bytes each) are taken here, not in the commits, the part of a
// region that does not run in parallel.
func (r *region) prepareMemos() {
	defer close(r.memosDone)
	for {
		p := newMemoPair()
		select {
		case <-r.memosStop:
			return
		case r.memos <- p:
		}
	}
}

// finish merges the committer's table additions into the builder; every
// goroutine has ended.
func (r *region) finish() {
	for s, id := range r.strNew {
		r.b.strIdx[s] = id
	}
	for f, id := range r.frameNew {
		r.b.frameIdx[f] = id
	}
}

// run commits the chunks in order and returns where the region ended.
func (r *region) run() (regionEnd, error) {
	var end regionEnd
	stopped := false
	var ferr error
	for c := range r.order {
		<-c.done
		<-r.slots
		if c.dead {
			continue
		}
		if stopped || ferr != nil {
			continue // drain: the walker and workers are being cancelled
		}
		res := c.res
		if res.panic {
			ferr = errParFallback
			close(r.cancel)
			continue
		}
		if commitHook != nil {
			commitHook(r)
		}
		if err := r.commit(c); err != nil {
			ferr = err
			close(r.cancel)
			continue
		}
		end = regionEnd{off: c.off + int64(c.end), events: c.firstEvent + int64(res.n) - r.startEvent(),
			in: res.in, pending: res.pending}
		if res.stopped {
			end.off = c.off + int64(res.stopOff)
			stopped = true
			close(r.cancel)
		}
		select {
		case r.results <- res:
		default:
		}
	}
	r.wg.Wait()
	r.fixes.Wait()
	close(r.memosStop)
	<-r.memosDone
	r.b.memo.made = nil
	if r.packq != nil {
		close(r.packq)
		<-r.packDone
		r.unmapRecChunks()
	}
	if r.mismatch {
		r.u.par.serialWalk = true
		walkFailures.Add(1)
	}
	if ferr != nil {
		return regionEnd{}, ferr
	}
	if r.walkErr != nil {
		return regionEnd{}, r.walkErr
	}
	if !stopped {
		end.off, end.in, end.pending = r.walkEnd.off, r.walkEnd.in, r.walkEnd.pending
		if end.events != r.walkEnd.events {
			return regionEnd{}, errParFallback
		}
	}
	r.b.events.truncate(r.startEvent() + end.events)
	if end.events == 0 {
		end.off = r.start
	}
	return end, nil
}

func (r *region) startEvent() int64 { return r.firstEvent }

// work decodes chunks until there are none.
func (r *region) work() {
	defer r.wg.Done()
	w := &pworker{view: &r.view, kinds: make([]int8, len(r.view.strs))}
	for c := range r.jobs {
		if c.seqd != nil { // cut by parallelWalk: find where it starts and ends
			r.scan(c)
			r.sequence(c)
			if c.dead {
				r.release(c)
				close(c.done)
				continue
			}
		}
		select {
		case <-r.cancel:
			c.res = &chunkResult{stopped: true}
		default:
			var res *chunkResult
			select {
			case res = <-r.results:
			default:
				res = &chunkResult{}
			}
			c.res = w.decodeChunk(c, res)
		}
		r.release(c)
		close(c.done)
	}
}

// release hands chunk c's buffer back to the walker, once c is decoded (or
// dead): the commit reads only the decoding, and a region that stops in c
// goes on from the file.
func (r *region) release(c *chunk) {
	if c.raw != nil {
		r.free <- c.raw
	} else {
		r.free <- c.buf
	}
	c.raw, c.buf = nil, nil
}
