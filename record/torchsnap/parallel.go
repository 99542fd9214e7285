package torchsnap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

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

// walkFailures counts the parallel walks that failed to cut a region (for
// tests).
var walkFailures atomic.Int64

// errParFallback makes ReadFile decode the file again without regions.
var errParFallback = errors.New("torchsnap: parallel decode fell back")

// parSource is a file the decoder may read anywhere.
type parSource struct {
	ra   io.ReaderAt
	size int64
	// serialWalk: a parallel walk failed to cut the file (parallelWalk), so
	// later regions walk it serially.
	serialWalk bool
	// offHeap puts the events outside the Go heap (ReadFileMapped).
	offHeap bool
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
	r := newRegion(u, start)
	end, err := r.run()
	if err != nil {
		return false, err
	}
	if end.events == 0 && end.off == start {
		r.finish()
		return false, nil
	}
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

// regionEnd is where a region stopped.
type regionEnd struct {
	off     int64 // file offset where the sequential machine goes on
	events  int64 // events the region decoded
	in      bool  // a batch is open there
	pending int   // events of it
}

type region struct {
	u          *unpickler
	b          *builder
	start      int64
	view       regionView
	cancel     chan struct{}
	jobs       chan *chunk       // to the workers
	results    chan *chunkResult // committed, for reuse
	order      chan *chunk       // to the committer, in order
	free       chan []byte
	wg         sync.WaitGroup
	fixes      sync.WaitGroup // the committed chunks' fixStacks
	walkEnd    regionEnd      // set by the walker before it closes order
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
}

func newRegion(u *unpickler, start int64) *region {
	b := u.b
	workers := regionWorkers()
	left := u.par.size - start
	csize := int(min(int64(parChunkMax), max(int64(parChunkMin), left/int64(8*workers))))
	r := &region{u: u, b: b, start: start, cancel: make(chan struct{}),
		jobs: make(chan *chunk, 2*workers), order: make(chan *chunk, 2*workers+4),
		free: make(chan []byte, workers+4), results: make(chan *chunkResult, 2*workers+8), csize: csize,
		strNew: map[string]int32{}, frameNew: map[trace.Frame]int32{}, stopWalk: make(chan struct{})}
	r.view = regionView{strs: b.strs, strIdx: b.strIdx, frameIdx: b.frameIdx,
		memoK: append([][]vkind(nil), b.memo.k...), memoV: append([][]int32(nil), b.memo.v...), memoN: b.memo.n}
	// A buffer is held by a chunk from its cut to the end of its decoding
	// (release), so that one per worker and a couple for the walker to cut
	// ahead with keep every worker busy.
	for range workers + 2 {
		r.free <- nil
	}
	r.firstEvent = b.events.n
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
	return r
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

// walk reads the region's bytes into chunk buffers and cuts them into
// chunks, until the list ends or the region is cancelled.
func (r *region) walk() {
	defer r.wg.Done()
	defer close(r.order)
	defer close(r.jobs)
	off := r.start
	var carry []byte
	in, pending := false, 0
	events := r.firstEvent
	memoBase := r.b.memo.n
	eof := false
	grow := 0
	for {
		var buf []byte
		select {
		case buf = <-r.free:
		case <-r.cancel:
			return
		}
		size := max(r.csize, grow, len(carry))
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		n := copy(buf, carry)
		if !eof && n < len(buf) {
			got, err := r.u.par.ra.ReadAt(buf[n:], off+int64(n))
			n += got
			if err == io.EOF {
				eof = true
			} else if err != nil {
				r.walkErr = err
				return
			}
		}
		buf = buf[:n]
		c := &chunk{buf: buf, off: off, firstEvent: events, memoBase: memoBase, in: in, pending: pending,
			done: make(chan struct{})}
		i, entries, memos, ended := walkChunk(buf, &in, &pending, eof)
		grow = 0
		if i == 0 && !ended {
			// Not one whole item in the buffer: a larger buffer, unless the
			// file ends or the entry is too large.
			if eof || len(buf) >= parMaxEntry {
				ended = true
			} else {
				carry = append(carry[:0:0], buf...)
				grow = 2 * len(buf)
				r.free <- buf[:0]
				continue
			}
		}
		c.end, c.entries = i, entries
		c.dst = r.b.events.reserve(int64(entries))
		events += int64(entries)
		memoBase += uint64(memos)
		r.jobs <- c
		r.order <- c
		if ended {
			r.walkEnd = regionEnd{off: off + int64(i), events: events - r.firstEvent, in: in, pending: pending}
			return
		}
		carry = append([]byte(nil), buf[i:]...) // the start of an incomplete item
		off += int64(i)
	}
}

// parallelWalk cuts the region for the workers without walking it: it
// splits the rest of the file into segments of csize bytes and hands each to
// a worker as a chunk, which walks it itself (scan): a chunk starts at the
// first batch start (isBatchStart) in its segment, found by a byte search,
// and its walk stops at the first batch start past the segment, where the
// next chunk should start. The workers then take the chunks in order
// (sequence): a chunk is part of the region only if it starts exactly where
// the one before stopped. Its predecessor's walk was exact from an exact
// start, so that start is a true batch boundary, not the bytes of a
// string that look like one; the first chunk starts at the region's start.
// Events and memo slots are counted along, so each chunk learns its first
// event and memo slot, and its events' slots are reserved in order.
//
// The serial walk (walk) costs about 4 ns per opcode on one goroutine,
// enough to bound the whole region on a large host; this one spreads it,
// and the reads, over the workers, leaving only a byte search and the hand
// over in order. Where the cut fails (a start that is not where the chunk
// before stopped, a segment the walk cannot get through in a bounded buffer)
// the region ends before that chunk, in a state the sequential machine goes
// on from, and later regions of the file walk serially.
func (r *region) parallelWalk() {
	defer r.wg.Done()
	defer close(r.order)
	defer close(r.jobs)
	var prev *chunk
	size := r.u.par.size
	for off := r.start; off < size; off += int64(r.csize) {
		var buf []byte
		select {
		case buf = <-r.free:
		case <-r.cancel:
			return
		case <-r.stopWalk:
			return
		}
		c := &chunk{raw: buf, seg: off, segEnd: min(off+int64(r.csize), size), prev: prev,
			seqd: make(chan struct{}), done: make(chan struct{})}
		r.jobs <- c
		r.order <- c
		prev = c
	}
}

// scanMargin is how far past its segment a chunk reads at first, for the
// batch start its walk stops at: a few batches of CPython's 1000 entries.
func (r *region) scanMargin() int64 { return int64(r.csize/4 + 64) }

// scan reads chunk c's bytes and walks them: from the first batch start in
// its segment (or the region's start) to the first batch start past it. A
// panic (a bug) fails the chunk, which ends the region there.
func (r *region) scan(c *chunk) {
	defer func() {
		if recover() != nil {
			c.failed = true
		}
	}()
	lo := c.seg
	if c.prev != nil {
		lo-- // the APPENDS of a batch start at the segment's first byte
	}
	c.rawOff = lo
	read := func(n int64) (eof bool) {
		have := len(c.raw)
		n = min(n, r.u.par.size-lo)
		if int64(cap(c.raw)) < n {
			// Room for twice the bytes: most chunks read once more (see
			// scanMargin), and outgrowing the buffer then would leave it
			// behind as garbage. (make, not append: the room is read into
			// before it is used, and new memory is then not cleared first.)
			grown := make([]byte, have, min(2*n, r.u.par.size-lo))
			copy(grown, c.raw)
			c.raw = grown
		}
		c.raw = c.raw[:n]
		got, err := r.u.par.ra.ReadAt(c.raw[have:], lo+int64(have))
		c.raw = c.raw[:have+got]
		if err != nil && err != io.EOF {
			panic(err) // a read error: the sequential machine meets it again
		}
		return lo+int64(len(c.raw)) >= r.u.par.size || err == io.EOF
	}
	c.raw = c.raw[:0]
	eof := read(c.segEnd + r.scanMargin() - lo)
	i := int(c.seg - lo)
	if c.prev != nil {
		// The first batch start in the segment.
		to := min(len(c.raw), int(c.segEnd-lo)+len(batchStart)-2)
		p := bytes.Index(c.raw[:to], batchStart)
		if p < 0 {
			c.empty = true
			return
		}
		i = p + 1
	}
	c.start = lo + int64(i)
	stopFrom := int(c.segEnd - lo)
	// A bound on the bytes a chunk may read: a few segments, or a batch of
	// large entries (it frees the tests' tiny chunks of it).
	limit := max(8*int64(r.csize), 1<<20) + r.scanMargin()
	in, pending := false, 0
	for {
		j, entries, memos, st := walkItems(c.raw, i, stopFrom, &in, &pending, eof)
		c.entries += entries
		c.memos += memos
		i = j
		switch st {
		case itemsStop:
			c.stop = lo + int64(i)
			return
		case itemsEnded:
			c.stop, c.ended, c.endIn, c.endPending = lo+int64(i), true, in, pending
			return
		}
		// More bytes, up to a bound: the serial walk takes what this cannot.
		n := int64(len(c.raw)) * 2
		if n > limit {
			c.failed = true
			return
		}
		eof = read(n)
	}
}

// sequence decides, in order, whether chunk c is part of the region (see
// parallelWalk), and if so sets its first event and memo slot and reserves
// its events. It closes c.seqd when done, whatever happens.
func (r *region) sequence(c *chunk) {
	defer close(c.seqd)
	// The region's own start (its memo slot as frozen in the view: the
	// builder's memo grows as chunks commit, on another goroutine).
	st := seqState{off: r.start, event: r.firstEvent, memo: r.view.memoN}
	if c.prev != nil {
		<-c.prev.seqd
		st = c.prev.next
	}
	c.next, c.dead = st, true
	switch {
	case st.over:
		return
	case c.empty:
		return // the predecessor's walk went past this segment
	case c.failed || c.start != st.off:
		// The region ends where the last chunk of it stopped, at a batch
		// start (or the region's start): no batch open there.
		r.mismatch = true
		r.endWalk(regionEnd{off: st.off, events: st.event - r.firstEvent})
		c.next.over = true
		return
	}
	i := int(c.start - c.rawOff)
	c.dead = false
	c.buf, c.off, c.end = c.raw[i:], c.start, int(c.stop-c.start)
	c.firstEvent, c.memoBase = st.event, st.memo
	c.dst = r.b.events.reserve(int64(c.entries))
	c.next = seqState{off: c.stop, event: st.event + int64(c.entries), memo: st.memo + uint64(c.memos)}
	if c.ended {
		r.endWalk(regionEnd{off: c.stop, events: c.next.event - r.firstEvent, in: c.endIn, pending: c.endPending})
		c.next.over = true
	}
}

// endWalk records where the parallel walk ended the region and stops cutting.
func (r *region) endWalk(end regionEnd) {
	r.walkEnd = end
	r.stopWalkOnce.Do(func() { close(r.stopWalk) })
}

// walkChunk walks the items of a region in buf (batch marks, entries,
// appends, frame headers), updating the batch state. It returns the offset
// of the first item not walked, the entries and memo slots before it, and
// whether the region ends there (rather than the buffer).
func walkChunk(buf []byte, in *bool, pending *int, eof bool) (i, entries, memos int, ended bool) {
	i, entries, memos, st := walkItems(buf, 0, len(buf)+1, in, pending, eof)
	return i, entries, memos, st == itemsEnded
}

// How walkItems stopped.
const (
	itemsShort = iota // at the end of buf, before an item it needs more bytes for
	itemsEnded        // at an item the region cannot go past
	itemsStop         // at the first batch start at or past stopFrom
)

// walkItems is walkChunk from buf[i] on, which also stops at the first item
// boundary at or past stopFrom that is a batch start (isBatchStart) with no
// batch open: there, the parallel walk hands over to the next chunk.
func walkItems(buf []byte, i, stopFrom int, in *bool, pending *int, eof bool) (_, entries, memos, st int) {
	short := func() int {
		if eof {
			return itemsEnded
		}
		return itemsShort
	}
	for {
		if i >= stopFrom && !*in && i > 0 && buf[i-1] == opAppends {
			if i+len(batchStart)-1 > len(buf) && !eof {
				return i, entries, memos, itemsShort // cannot tell yet
			}
			if isBatchStart(buf, i) {
				return i, entries, memos, itemsStop
			}
		}
		if i >= len(buf) {
			return i, entries, memos, short()
		}
		switch buf[i] {
		case opFrame:
			if i+9 > len(buf) {
				return i, entries, memos, short()
			}
			i += 9
			continue
		case opMark:
			if *in {
				return i, entries, memos, itemsEnded
			}
			*in, *pending = true, 0
			i++
			continue
		case opAppends:
			if !*in {
				return i, entries, memos, itemsEnded
			}
			*in, *pending = false, 0
			i++
			continue
		case opEmptyDict:
		default:
			return i, entries, memos, itemsEnded
		}
		j, m, wst := walkEntry(buf, i)
		switch wst {
		case walkShort:
			return i, entries, memos, short()
		case walkBad:
			return i, entries, memos, itemsEnded
		}
		if !*in {
			// A batch of one: the entry, then APPEND (after any frame headers).
			for j < len(buf) && buf[j] == opFrame && j+9 <= len(buf) {
				j += 9
			}
			if j >= len(buf) || (buf[j] == opFrame && j+9 > len(buf)) {
				return i, entries, memos, short()
			}
			if buf[j] != opAppend {
				return i, entries, memos, itemsEnded
			}
			j++
		} else {
			*pending++
		}
		i = j
		entries++
		memos += m
	}
}

// batchStart is how CPython starts a batch of trace entries after the
// previous batch's APPENDS: MARK, then the first entry's EMPTY_DICT MEMOIZE
// MARK. The parallel walk cuts chunks at such points (the APPENDS before
// included in the test), where no batch is open.
var batchStart = []byte{opAppends, opMark, opEmptyDict, opMemoize, opMark}

// isBatchStart reports whether buf[i-1:] starts with batchStart.
func isBatchStart(buf []byte, i int) bool {
	return i > 0 && i+len(batchStart)-1 <= len(buf) && string(buf[i-1:i+len(batchStart)-1]) == string(batchStart)
}

const (
	walkOK = iota
	walkShort
	walkBad
)

// walkLen is, by opcode, how walkEntry steps over it: a length, or one of
// the walk* codes below; 0 for opcodes it does not walk.
var walkLen = func() (t [256]int8) {
	for _, op := range []byte{opBinGet, opBinInt1} {
		t[op] = 2
	}
	t[opBinInt2] = 3
	t[opLongBinGet], t[opBinInt] = 5, 5
	for _, op := range []byte{opNone, opNewTrue, opNewFalse, opEmptyList, opEmptyDict, opAppend, opSetItem} {
		t[op] = 1
	}
	t[opBinFloat], t[opFrame] = 9, 9
	t[opLong1], t[opShortBinUni] = walkShortArg, walkShortArg
	t[opBinUnicode] = walkLongArg
	t[opMemoize] = walkMemo
	t[opMark] = walkMark
	t[opSetItems], t[opAppends] = walkPop, walkPop
	return t
}()

const (
	walkShortArg = -1 - iota // a length byte, then that many bytes
	walkLongArg              // a 4-byte length, then that many bytes
	walkMemo
	walkMark
	walkPop
)

// walkEntry walks the entry dict at buf[i] (EMPTY_DICT MEMOIZE MARK …
// SETITEMS) by opcode lengths, and returns the offset past it and its memo
// slots. Only opcodes of plain data are walked: anything else is walkBad.
func walkEntry(buf []byte, i int) (int, int, int) {
	if i+3 > len(buf) {
		return 0, 0, walkShort
	}
	if buf[i+1] != opMemoize || buf[i+2] != opMark {
		return 0, 0, walkBad
	}
	depth, memos := 1, 1
	j := i + 3
	limit := min(len(buf), i+parMaxEntry)
	for j < limit {
		switch l := walkLen[buf[j]]; {
		case l > 0:
			j += int(l)
		case l == walkShortArg:
			if j+1 >= limit {
				return 0, 0, walkShort
			}
			j += 2 + int(buf[j+1])
		case l == walkMemo:
			memos++
			j++
		case l == walkMark:
			depth++
			j++
		case l == walkPop:
			depth--
			if depth == 0 {
				if buf[j] != opSetItems {
					return 0, 0, walkBad
				}
				return j + 1, memos, walkOK
			}
			j++
		case l == walkLongArg:
			if j+5 > limit {
				return 0, 0, walkShort
			}
			j += 5 + int(binary.LittleEndian.Uint32(buf[j+1:]))
		default:
			return 0, 0, walkBad
		}
	}
	if limit < len(buf) {
		return 0, 0, walkBad // longer than parMaxEntry
	}
	return 0, 0, walkShort
}

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

// pworker decodes chunks with tables of its own.
type pworker struct {
	view *regionView
	c    *chunk
	res  *chunkResult
	buf  []byte

	kinds    []int8 // by string id: the trace.Kind it names, -1 none, 0 unknown yet
	strIdx   map[string]int32
	frameIdx map[trace.Frame]int32
	stackKey map[string]int32
	extStack map[uint64]int32
	keyBuf   []byte
	items    [maxFlatItems]value
	refs     []value
}

// wmark is the size of a worker's tables, to undo a partly decoded entry.
type wmark struct{ memo, strs, frames, lists, stacks int }

func (w *pworker) mark() wmark {
	r := w.res
	return wmark{len(r.memo.k), len(r.strs), len(r.frames), len(r.lists), len(r.stacks)}
}

// undo drops what a partly decoded entry added. The maps may keep entries
// past the tables' ends: nothing decodes after a stop.
func (w *pworker) undo(m wmark) {
	r := w.res
	r.memo.truncate(m.memo)
	r.strs, r.frames, r.lists, r.stacks = r.strs[:m.strs], r.frames[:m.frames], r.lists[:m.lists], r.stacks[:m.stacks]
}

// decodeChunk decodes c's entries; a panic (a bug: the input is checked
// everywhere) becomes a fallback to sequential decoding.
func (w *pworker) decodeChunk(c *chunk, res *chunkResult) (_ *chunkResult) {
	defer func() {
		if recover() != nil {
			res = &chunkResult{panic: true}
		}
	}()
	w.c, w.buf = c, c.buf[:c.end]
	*res = chunkResult{memo: wmemo{res.memo.k[:0], res.memo.v[:0]}, strs: res.strs[:0], frames: res.frames[:0],
		lists: res.lists[:0], stacks: res.stacks[:0], items: res.items[:0]}
	w.res = res
	if w.strIdx == nil {
		w.strIdx, w.frameIdx, w.stackKey, w.extStack = map[string]int32{}, map[trace.Frame]int32{}, map[string]int32{}, map[uint64]int32{}
	} else {
		clear(w.strIdx)
		clear(w.frameIdx)
		clear(w.stackKey)
		clear(w.extStack)
	}
	in, pending := c.in, c.pending
	ev := 0
	dst, dj := c.dst, 0
	buf := w.buf
loop:
	for i := 0; i < len(buf); {
		switch buf[i] {
		case opFrame:
			i += 9
			continue
		case opMark:
			in, pending = true, 0
			i++
			continue
		case opAppends:
			in, pending = false, 0
			i++
			continue
		case opAppend:
			pending = 0
			i++
			continue
		}
		// An entry (the walker saw to it), decoded in its reserved place.
		for dj == len(dst[0]) {
			dst, dj = dst[1:], 0
		}
		m := w.mark()
		j, ok := w.entry(i, c.firstEvent+int64(ev), &dst[0][dj])
		if !ok {
			w.undo(m)
			res.stopped, res.stopOff = true, i
			break loop
		}
		dj++
		i = j
		ev++
		pending++
	}
	res.n, res.in, res.pending = ev, in, pending
	return res
}

// get resolves memo slot idx for a worker.
func (w *pworker) get(idx uint64) (value, bool) {
	v := w.view
	if idx < v.memoN {
		c, o := idx/memoChunk, idx%memoChunk
		if c >= uint64(len(v.memoK)) || o >= uint64(len(v.memoK[c])) || o >= uint64(len(v.memoV[c])) {
			return value{}, false
		}
		x := value{v.memoK[c][o], int64(v.memoV[c][o])}
		switch x.k {
		case vDict, vMark, vWide: // a wide slot: left to the sequential machine
			return value{}, false
		case vList, vTuple:
			return value{vExt, int64(idx)}, true
		}
		return x, true
	}
	if idx < w.c.memoBase {
		return value{vExt, int64(idx)}, true
	}
	if r := idx - w.c.memoBase; r < uint64(len(w.res.memo.k)) && r < uint64(len(w.res.memo.v)) {
		return value{w.res.memo.k[r], w.res.memo.v[r]}, true
	}
	return value{}, false
}

func (w *pworker) memoize(v value) { w.res.memo.set(len(w.res.memo.k), v) }

// wmemo is a chunk's memo slots, kinds and values apart as in memo, so
// that commit adds them to the memo in two copies.
type wmemo struct {
	k []vkind
	v []int64
}

// set stores v in slot i, at most the next one.
func (m *wmemo) set(i int, v value) {
	if i == len(m.k) {
		m.k, m.v = append(m.k, v.k), append(m.v, v.i)
		return
	}
	m.k[i], m.v[i] = v.k, v.i
}

func (m *wmemo) truncate(n int) { m.k, m.v = m.k[:n], m.v[:n] }

// str interns a string: the builder's id if it has one, else a local one.
func (w *pworker) str(p []byte) value {
	if id, ok := w.view.strIdx[string(p)]; ok {
		return value{vStr, int64(id)}
	}
	if id, ok := w.strIdx[string(p)]; ok {
		return value{vLStr, int64(id)}
	}
	s := string(p)
	id := int32(len(w.res.strs))
	w.res.strs = append(w.res.strs, s)
	w.strIdx[s] = id
	return value{vLStr, int64(id)}
}

func (w *pworker) text(v value) (string, bool) {
	switch v.k {
	case vStr:
		if v.i < int64(len(w.view.strs)) {
			return w.view.strs[v.i], true
		}
	case vLStr:
		return w.res.strs[v.i], true
	}
	return "", false
}

// scalar decodes the scalar or string object at buf[i] (a string with its
// MEMOIZE, if any), or a memo reference. ok is false for anything else.
func (w *pworker) scalar(i int) (value, int, bool) {
	buf := w.buf
	if i >= len(buf) {
		return value{}, 0, false
	}
	switch buf[i] {
	case opBinGet:
		if i+2 > len(buf) {
			return value{}, 0, false
		}
		v, ok := w.get(uint64(buf[i+1]))
		return v, i + 2, ok
	case opLongBinGet:
		if i+5 > len(buf) {
			return value{}, 0, false
		}
		v, ok := w.get(uint64(binary.LittleEndian.Uint32(buf[i+1:])))
		return v, i + 5, ok
	case opBinInt1:
		if i+2 > len(buf) {
			return value{}, 0, false
		}
		return intValue(int64(buf[i+1])), i + 2, true
	case opBinInt2:
		if i+3 > len(buf) {
			return value{}, 0, false
		}
		return intValue(int64(binary.LittleEndian.Uint16(buf[i+1:]))), i + 3, true
	case opBinInt:
		if i+5 > len(buf) {
			return value{}, 0, false
		}
		return intValue(int64(int32(binary.LittleEndian.Uint32(buf[i+1:])))), i + 5, true
	case opLong1:
		if i+2 > len(buf) {
			return value{}, 0, false
		}
		n := int(buf[i+1])
		if n > 8 || i+2+n > len(buf) {
			return value{}, 0, false
		}
		var x uint64
		for k := n - 1; k >= 0; k-- {
			x = x<<8 | uint64(buf[i+2+k])
		}
		if n > 0 {
			shift := uint(64 - 8*n)
			x = uint64(int64(x<<shift) >> shift)
		}
		return intValue(int64(x)), i + 2 + n, true
	case opNone:
		return value{}, i + 1, true
	case opNewTrue:
		return boolValue(true), i + 1, true
	case opNewFalse:
		return boolValue(false), i + 1, true
	case opShortBinUni, opBinUnicode:
		var n, h int
		if buf[i] == opShortBinUni {
			if i+2 > len(buf) {
				return value{}, 0, false
			}
			n, h = int(buf[i+1]), 2
		} else {
			if i+5 > len(buf) {
				return value{}, 0, false
			}
			l := binary.LittleEndian.Uint32(buf[i+1:])
			if int64(l) > int64(len(buf)) {
				return value{}, 0, false
			}
			n, h = int(l), 5
		}
		j := i + h + n
		if j > len(buf) {
			return value{}, 0, false
		}
		v := w.str(buf[i+h : j])
		if j < len(buf) && buf[j] == opMemoize {
			w.memoize(v)
			j++
		}
		return v, j, true
	}
	return value{}, 0, false
}

// skipFrames skips FRAME headers at buf[i].
func (w *pworker) skipFrames(i int) int {
	for i+9 <= len(w.buf) && w.buf[i] == opFrame {
		i += 9
	}
	return i
}

// entry decodes the trace entry dict at buf[i] into *out, event evIdx of
// the store (its Seq, as eventStore.add sets it), as flatDict and toEvent
// would, and returns the offset past it. ok is false for anything this
// subset does not cover (*out is then undefined).
func (w *pworker) entry(i int, evIdx int64, out *cev) (int, bool) {
	if j, ok := w.flatEntry(i, evIdx, out); ok {
		return j, true
	}
	j, e, ok := w.itemsEntry(i, evIdx)
	if ok {
		e.Seq = evIdx
		*out = e
	}
	return j, ok
}

// itemsEntry is entry for any entry of the subset: it collects the items,
// then converts them (event).
func (w *pworker) itemsEntry(i int, evIdx int64) (int, cev, bool) {
	buf := w.buf
	if i+3 > len(buf) || buf[i] != opEmptyDict || buf[i+1] != opMemoize || buf[i+2] != opMark {
		return 0, cev{}, false
	}
	slot := len(w.res.memo.k)
	w.memoize(value{k: vOpen})
	items := &w.items
	n := 0
	j := i + 3
	// The prefix memo's first chunk, where the keys and most shared objects
	// are, one indirection closer.
	var k0 []vkind
	var v0 []int32
	if len(w.view.memoK) > 0 && len(w.view.memoV) > 0 {
		k0, v0 = w.view.memoK[0], w.view.memoV[0]
	}
	for {
		if n == maxFlatItems {
			return 0, cev{}, false
		}
		var v value
		if j+10 <= len(buf) {
			// Fast path: the opcode and its argument are in buf.
			p := (*[10]byte)(buf[j : j+10])
			switch p[0] {
			case opSetItems:
				j++
				goto done
			case opBinGet, opLongBinGet:
				var idx uint64
				if p[0] == opBinGet {
					idx, j = uint64(p[1]), j+2
				} else {
					idx, j = uint64(binary.LittleEndian.Uint32(p[1:5])), j+5
				}
				if idx < uint64(len(k0)) && idx < uint64(len(v0)) && idx < w.view.memoN {
					v = value{k0[idx], int64(v0[idx])}
					switch v.k {
					case vDict, vMark, vWide:
						return 0, cev{}, false
					case vList, vTuple:
						v = value{vExt, int64(idx)}
					}
				} else {
					var ok bool
					if v, ok = w.get(idx); !ok {
						return 0, cev{}, false
					}
				}
			case opBinInt1:
				v = intValue(int64(p[1]))
				j += 2
			case opBinInt2:
				v = intValue(int64(binary.LittleEndian.Uint16(p[1:3])))
				j += 3
			case opBinInt:
				v = intValue(int64(int32(binary.LittleEndian.Uint32(p[1:5]))))
				j += 5
			case opLong1:
				c := int(p[1])
				if c > 8 {
					return 0, cev{}, false
				}
				v = intValue(long1(c, binary.LittleEndian.Uint64(p[2:10])))
				j += 2 + c
			case opNone:
				j++
			case opNewTrue:
				v = boolValue(true)
				j++
			case opNewFalse:
				v = boolValue(false)
				j++
			default:
				goto slow
			}
			if v.k == vOpen {
				return 0, cev{}, false
			}
			items[n] = v
			n++
			continue
		}
	slow:
		j = w.skipFrames(j)
		if j >= len(buf) {
			return 0, cev{}, false
		}
		if buf[j] == opSetItems {
			j++
			break
		}
		{
			var ok bool
			if n%2 == 1 && buf[j] == opEmptyList {
				v, j, ok = w.framesList(j)
			} else {
				v, j, ok = w.scalar(j)
			}
			if !ok || v.k == vOpen {
				return 0, cev{}, false
			}
		}
		items[n] = v
		n++
	}
done:
	if n%2 != 0 || n < 2 {
		return 0, cev{}, false
	}
	e, ok := w.event(items[:n])
	if !ok {
		return 0, cev{}, false
	}
	w.res.memo.set(slot, value{vEvent, evIdx})
	return j, e, true
}

// flatEntry is entry for the usual trace entry, as flatEvent is flatDict
// for it: keys that are references to strings from before the region, the
// first one "action", and values that are scalars or memo references. It
// converts each item into *ev as it reads it, as event would, instead of
// collecting the items and converting them after. It returns false for
// anything else, and for any entry event would refuse or convert otherwise
// than simply (an oom, a pool id, a second frames), having changed nothing
// but *ev (entry then decodes it its own way).
func (w *pworker) flatEntry(i int, evIdx int64, ev *cev) (int, bool) {
	buf := w.buf
	if i+3 > len(buf) || buf[i] != opEmptyDict || buf[i+1] != opMemoize || buf[i+2] != opMark {
		return 0, false
	}
	// The prefix memo's first chunk, where the keys and most shared objects
	// are, one indirection closer.
	var k0 []vkind
	var v0 []int32
	if len(w.view.memoK) > 0 && len(w.view.memoV) > 0 {
		k0, v0 = w.view.memoK[0], w.view.memoV[0]
	}
	memoN := w.view.memoN
	slot := len(w.res.memo.k)
	w.memoize(value{k: vOpen})
	*ev = cev{Seq: evIdx, Stack: trace.NoStack}
	frames, hasAddr := value{k: vMark}, false // none yet
	j := i + 3
	for pairs := 0; ; pairs++ {
		if j+10 > len(buf) || pairs == maxFlatItems/2 {
			break
		}
		// The key: a reference to a string from before the region.
		var idx uint64
		switch p := (*[5]byte)(buf[j : j+5]); p[0] {
		case opSetItems:
			if pairs == 0 || !hasAddr && needsAddr(ev.Kind) { // the sequential machine reports a missing addr
				goto fail
			}
			j++
			goto done
		case opBinGet:
			idx, j = uint64(p[1]), j+2
		case opLongBinGet:
			idx, j = uint64(binary.LittleEndian.Uint32(p[1:5])), j+5
		default:
			goto fail
		}
		if idx >= uint64(len(k0)) || idx >= uint64(len(v0)) || idx >= memoN || k0[idx] != vStr {
			goto fail
		}
		key := int64(v0[idx])
		if pairs == 0 && key != kAction || j+10 > len(buf) {
			goto fail
		}
		// The value, as itemsEntry's fast path reads it, written out again
		// for the same reason as in flatEvent: a call per value costs more
		// than the lines it saves.
		var v value
		switch p := (*[10]byte)(buf[j : j+10]); p[0] {
		case opBinGet, opLongBinGet:
			if p[0] == opBinGet {
				idx, j = uint64(p[1]), j+2
			} else {
				idx, j = uint64(binary.LittleEndian.Uint32(p[1:5])), j+5
			}
			if idx < uint64(len(k0)) && idx < uint64(len(v0)) && idx < memoN {
				v = value{k0[idx], int64(v0[idx])}
				switch v.k {
				case vDict, vMark, vWide:
					goto fail
				case vList, vTuple:
					v = value{vExt, int64(idx)}
				}
			} else {
				var ok bool
				if v, ok = w.get(idx); !ok || v.k == vOpen {
					goto fail
				}
			}
		case opBinInt1:
			v = intValue(int64(p[1]))
			j += 2
		case opBinInt2:
			v = intValue(int64(binary.LittleEndian.Uint16(p[1:3])))
			j += 3
		case opBinInt:
			v = intValue(int64(int32(binary.LittleEndian.Uint32(p[1:5]))))
			j += 5
		case opLong1:
			c := int(p[1])
			if c > 8 {
				goto fail
			}
			v = intValue(long1(c, binary.LittleEndian.Uint64(p[2:10])))
			j += 2 + c
		case opNone:
			j++
		case opNewTrue:
			v = boolValue(true)
			j++
		case opNewFalse:
			v = boolValue(false)
			j++
		default:
			goto fail
		}
		// As event, with wInt and wUint's conversions.
		isInt := v.k == vInt || v.k == vBool
		switch key {
		case kAction:
			var ok bool
			if ev.Kind, ok = w.kindOf(v); !ok || ev.Kind == trace.KindOOM {
				goto fail
			}
		case kAddr, kDeviceFree:
			if !isInt {
				goto fail
			}
			ev.Addr, hasAddr = uint64(v.i), hasAddr || key == kAddr
		case kSize:
			if !isInt {
				goto fail
			}
			ev.Size = v.i
		case kStream:
			if !isInt {
				goto fail
			}
			ev.Stream = uint64(v.i)
		case kTimeUs:
			if v.k != vNone {
				if !isInt {
					goto fail
				}
				ev.TimeUs = v.i
			}
		case kFrames:
			if frames.k != vMark || (v.k != vNone && v.k != vExt && v.k != vLList) {
				goto fail
			}
			frames = v
		case kPoolID:
			if v.k != vNone {
				goto fail
			}
		}
	}
fail:
	w.res.memo.truncate(slot)
	return 0, false
done:
	if frames.k != vMark {
		// Last, once nothing can fail: stackOf cannot, for these kinds.
		ev.Stack, _ = w.stackOf(frames)
	}
	w.res.memo.set(slot, value{vEvent, evIdx})
	return j, true
}

// event converts an entry's items as toEvent does.
func (w *pworker) event(p []value) (cev, bool) {
	ev := cev{Stack: trace.NoStack}
	hasAddr := false
	for j := 0; j+1 < len(p); j += 2 {
		k, v := p[j], p[j+1]
		if k.k == vExt || k.k == vLList {
			return cev{}, false // a key from an earlier chunk: could be a schema key
		}
		if k.k != vStr || k.i >= numKeys {
			continue
		}
		hasAddr = hasAddr || k.i == kAddr
		var ok bool
		switch k.i {
		case kAction:
			if ev.Kind, ok = w.kindOf(v); !ok {
				return cev{}, false
			}
		case kAddr:
			if ev.Kind != trace.KindOOM {
				ev.Addr, ok = wUint(v)
			} else {
				ok = true
			}
		case kDeviceFree:
			ev.Addr, ok = wUint(v)
		case kSize:
			ev.Size, ok = wInt(v)
		case kStream:
			ev.Stream, ok = wUint(v)
		case kTimeUs:
			ok = true
			if v.k != vNone {
				ev.TimeUs, ok = wInt(v)
			}
		case kFrames:
			ev.Stack, ok = w.stackOf(v)
		case kPoolID:
			ok = v.k == vNone
		default:
			ok = true
		}
		if !ok {
			return cev{}, false
		}
	}
	if ev.Kind == trace.KindOOM {
		for j := 0; j+1 < len(p); j += 2 {
			if k := p[j]; k.k == vStr && k.i == kDeviceFree {
				ev.Addr, _ = wUint(p[j+1])
			}
		}
	}
	if ev.Kind == 0 || !hasAddr && needsAddr(ev.Kind) {
		return cev{}, false // no action, or no addr: let toEvent tell
	}
	return ev, true
}

func wInt(v value) (int64, bool) {
	switch v.k {
	case vInt, vBool:
		return v.i, true
	}
	return 0, false
}

func wUint(v value) (uint64, bool) {
	switch v.k {
	case vInt, vBool:
		return uint64(v.i), true
	}
	return 0, false
}

// kindOf returns the kind an action value names; ok is false for anything
// but a known action string.
func (w *pworker) kindOf(v value) (trace.Kind, bool) {
	if v.k == vStr && v.i >= 0 && v.i < int64(len(w.kinds)) {
		if k := w.kinds[v.i]; k != 0 {
			return trace.Kind(k), k > 0
		}
	}
	s, ok := w.text(v)
	if !ok {
		return 0, false
	}
	kind, ok := trace.ParseKind(s)
	if v.k == vStr && v.i >= 0 && v.i < int64(len(w.kinds)) {
		k := int8(-1)
		if ok {
			k = int8(kind)
		}
		w.kinds[v.i] = k
	}
	return kind, ok
}

// framesList decodes a frames list (EMPTY_LIST MEMOIZE, then batches of
// frame dicts or references to them) at buf[i].
func (w *pworker) framesList(i int) (value, int, bool) {
	buf := w.buf
	if i+2 > len(buf) || buf[i+1] != opMemoize {
		return value{}, 0, false
	}
	li := len(w.res.lists)
	w.res.lists = append(w.res.lists, wlist{stack: -2})
	lv := value{vLList, int64(li)}
	w.memoize(lv)
	start := len(w.res.items)
	frames := w.res.items // appended to; the list's are frames[start:]
	j := i + 2
	for {
		j = w.skipFrames(j)
		if j >= len(buf) {
			return value{}, 0, false
		}
		switch buf[j] {
		case opMark:
			j++
			for {
				j = w.skipFrames(j)
				if j >= len(buf) {
					return value{}, 0, false
				}
				if buf[j] == opAppends {
					j++
					break
				}
				f, k, ok := w.frameItem(j)
				if !ok {
					return value{}, 0, false
				}
				frames = append(frames, f)
				j = k
			}
			continue
		case opEmptyDict, opBinGet, opLongBinGet:
			// A batch of one (item APPEND), or the next key after the list.
			if buf[j] != opEmptyDict {
				n := 2
				if buf[j] == opLongBinGet {
					n = 5
				}
				k := w.skipFrames(j + n)
				if k >= len(buf) || buf[k] != opAppend {
					break // the list ended
				}
			}
			f, k, ok := w.frameItem(j)
			if !ok {
				return value{}, 0, false
			}
			k = w.skipFrames(k)
			if k >= len(buf) || buf[k] != opAppend {
				return value{}, 0, false
			}
			frames = append(frames, f)
			j = k + 1
			continue
		}
		break
	}
	// A list of the frames of a stack the worker has already made (the
	// usual case: few distinct stacks, a new list per entry) takes that
	// stack at once and keeps no frames; stackOf would find the same.
	// Only a new stack's frames stay, for the commit to resolve.
	l := &w.res.lists[li]
	if id, ok := w.knownStack(frames[start:]); ok && deriveFrames {
		l.stack = id
		w.res.items = frames[:start]
		return lv, j, true
	}
	w.res.items = frames
	l.frames = frames[start:len(frames):len(frames)]
	return lv, j, true
}

// knownStack returns the local id of the stack of frames, if the worker has
// made it already (trace.NoStack for no frames).
func (w *pworker) knownStack(frames []value) (int32, bool) {
	if len(frames) == 0 {
		return int32(trace.NoStack), true
	}
	id, ok := w.stackKey[string(w.stackKeyOf(frames))]
	return id, ok
}

// frameItem decodes a frames list item: a frame dict or a reference to one.
func (w *pworker) frameItem(i int) (value, int, bool) {
	buf := w.buf
	if buf[i] != opEmptyDict {
		v, j, ok := w.scalar(i)
		if !ok || (buf[i] != opBinGet && buf[i] != opLongBinGet) {
			return value{}, 0, false
		}
		switch v.k {
		case vFrame, vLFrame, vExt:
			return v, j, true
		}
		return value{}, 0, false
	}
	if i+2 > len(buf) || buf[i+1] != opMemoize {
		return value{}, 0, false
	}
	slot := len(w.res.memo.k)
	w.memoize(value{k: vOpen})
	var p [8]value
	n := 0
	j := i + 2
	j = w.skipFrames(j)
	if j < len(buf) && buf[j] == opMark {
		for j++; ; {
			j = w.skipFrames(j)
			if j >= len(buf) {
				return value{}, 0, false
			}
			if buf[j] == opSetItems {
				j++
				break
			}
			if n == len(p) {
				return value{}, 0, false
			}
			v, k, ok := w.scalar(j)
			if !ok || v.k == vOpen {
				return value{}, 0, false
			}
			p[n] = v
			n++
			j = k
		}
	} else {
		for range 2 {
			v, k, ok := w.scalar(j)
			if !ok || v.k == vOpen {
				return value{}, 0, false
			}
			p[n] = v
			n++
			j = w.skipFrames(k)
		}
		if j >= len(buf) || buf[j] != opSetItem {
			return value{}, 0, false
		}
		j++
	}
	if n%2 != 0 || n == 0 {
		return value{}, 0, false
	}
	// As convert: a frame dict has filename (and no action, which would make
	// it a trace entry); toFrame reads filename, name and line.
	var f trace.Frame
	have := false
	for k := 0; k < n; k += 2 {
		key, v := p[k], p[k+1]
		if key.k == vExt {
			return value{}, 0, false
		}
		if key.k != vStr || key.i >= numKeys {
			continue
		}
		var ok bool
		switch key.i {
		case kAction:
			return value{}, 0, false
		case kFilename:
			f.File, ok = w.text(v)
			have = true
		case kName:
			f.Name, ok = w.text(v)
		case kLine:
			var l int64
			l, ok = wInt(v)
			f.Line = trace.LineOf(l)
		default:
			ok = true
		}
		if !ok {
			return value{}, 0, false
		}
	}
	if !have {
		return value{}, 0, false
	}
	var fv value
	if id, ok := w.view.frameIdx[f]; ok {
		fv = value{vFrame, int64(id)}
	} else if id, ok := w.frameIdx[f]; ok {
		fv = value{vLFrame, int64(id)}
	} else {
		id := int32(len(w.res.frames))
		w.res.frames = append(w.res.frames, f)
		w.frameIdx[f] = id
		fv = value{vLFrame, int64(id)}
	}
	w.res.memo.set(slot, fv)
	return fv, j, true
}

// stackKeyOf returns the key of stackKey for frames, in w.keyBuf.
func (w *pworker) stackKeyOf(frames []value) []byte {
	key := w.keyBuf[:0]
	for _, f := range frames {
		key = append(key, byte(f.k), byte(f.i), byte(f.i>>8), byte(f.i>>16), byte(f.i>>24), byte(f.i>>32), byte(f.i>>40))
	}
	w.keyBuf = key
	return key
}

// stackOf returns the local stack id of a frames value, as builder.stackOf.
func (w *pworker) stackOf(v value) (trace.StackID, bool) {
	switch v.k {
	case vNone:
		return trace.NoStack, true
	case vExt:
		if id, ok := w.extStack[uint64(v.i)]; ok {
			return trace.StackID(id), true
		}
		id := int32(len(w.res.stacks))
		w.res.stacks = append(w.res.stacks, wstack{ext: uint64(v.i), isExt: true})
		w.extStack[uint64(v.i)] = id
		return trace.StackID(id), true
	case vLList:
	default:
		return 0, false
	}
	l := &w.res.lists[v.i]
	if l.stack != -2 {
		return trace.StackID(l.stack), true
	}
	if len(l.frames) == 0 {
		l.stack = int32(trace.NoStack)
		return trace.NoStack, true
	}
	key := w.stackKeyOf(l.frames)
	id, ok := w.stackKey[string(key)]
	if !ok {
		id = int32(len(w.res.stacks))
		w.res.stacks = append(w.res.stacks, wstack{frames: l.frames})
		w.stackKey[string(key)] = id
	}
	l.stack = id
	return trace.StackID(id), true
}

// commit adds chunk c's decoding to the builder: its strings, frames and
// stacks in the order the sequential machine would have added them, its memo
// slots, and the global stack ids of its events.
func (r *region) commit(c *chunk) error {
	b := r.b
	res := c.res
	if res.n == 0 && len(res.memo.k) == 0 {
		return nil
	}
	if b.memo.n != c.memoBase || (!res.stopped && res.n != c.entries) {
		return errParFallback
	}
	strMap := make([]int32, len(res.strs))
	for i, s := range res.strs {
		strMap[i] = r.intern(s)
	}
	frameMap := make([]int32, len(res.frames))
	for i, f := range res.frames {
		frameMap[i] = r.frame(f)
	}
	resolveFrame := func(f value) (int32, error) {
		switch f.k {
		case vFrame:
			return int32(f.i), nil
		case vLFrame:
			return frameMap[f.i], nil
		case vExt:
			g, ok := b.memo.get(uint64(f.i))
			if !ok || g.k != vFrame {
				return 0, errParFallback
			}
			return int32(g.i), nil
		}
		return 0, errParFallback
	}
	stackMap := make([]trace.StackID, len(res.stacks))
	var ids []int32
	for i, st := range res.stacks {
		if st.isExt {
			g, ok := b.memo.get(st.ext)
			if !ok || (g.k != vList && g.k != vTuple) {
				return errParFallback
			}
			id, err := b.stackOf(g)
			if err != nil {
				return errParFallback
			}
			stackMap[i] = id
			continue
		}
		ids = ids[:0]
		for _, f := range st.frames {
			id, err := resolveFrame(f)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		stackMap[i] = b.internStack(ids)
	}
	// The slots: the worker's local kinds (rare past a file's first
	// entries) become the builder's, the rest is stored as it is.
	ks, vs := res.memo.k, res.memo.v[:len(res.memo.k)]
	for i, k := range ks {
		if k < vLStr {
			continue
		}
		v := value{k, vs[i]}
		switch k {
		case vLStr:
			v = value{vStr, int64(strMap[v.i])}
		case vLFrame:
			v = value{vFrame, int64(frameMap[v.i])}
		case vLList:
			l := &res.lists[v.i]
			if l.stack != -2 && deriveFrames {
				// A frames list made into a stack: compact, as the
				// sequential machine keeps it (listStore).
				st := trace.StackID(l.stack)
				if st != trace.NoStack {
					st = stackMap[st]
				}
				v = value{vList, b.lists.addFrames(int32(st))}
				break
			}
			vals := make([]value, len(l.frames))
			for j, f := range l.frames {
				id, err := resolveFrame(f)
				if err != nil {
					return err
				}
				vals[j] = value{vFrame, int64(id)}
			}
			nv := b.newList(vList, vals)
			if l.stack != -2 {
				st := trace.StackID(l.stack)
				if st != trace.NoStack {
					st = stackMap[st]
				}
				b.lists.at(nv.i).stack = int32(st)
			}
			v = nv
		default: // vOpen, or a kind never memoized
			return errParFallback
		}
		ks[i], vs[i] = v.k, v.i
	}
	b.memo.appendSlots(ks, vs)
	// The events' stack ids, on a goroutine of the chunk's own: the rewrite
	// reads and writes a cache line of every event, which a worker wrote on
	// another core, and the commits are the part of a region that does not
	// run in parallel, so they only make the map. run waits for these
	// goroutines before the region ends.
	if res.n > 0 && len(stackMap) > 0 {
		r.fixes.Add(1)
		go func(n int) {
			defer r.fixes.Done()
			fixStacks(c.dst, n, stackMap)
		}(res.n)
	}
	return nil
}

// fixStacks maps the stack ids of the first n events of dst, a chunk's
// reserved events, from the worker's to the builder's.
func fixStacks(dst [][]cev, n int, stackMap []trace.StackID) {
	for _, seg := range dst {
		if n == 0 {
			break
		}
		seg = seg[:min(n, len(seg))]
		for k := range seg {
			if s := seg[k].Stack; s != trace.NoStack {
				seg[k].Stack = stackMap[s]
			}
		}
		n -= len(seg)
	}
}

// intern is builder.internString for the committer.
func (r *region) intern(s string) int32 {
	if id, ok := r.b.strIdx[s]; ok {
		return id
	}
	if id, ok := r.strNew[s]; ok {
		return id
	}
	id := int32(len(r.b.strs))
	r.b.strs = append(r.b.strs, s)
	r.strNew[s] = id
	return id
}

// frame is toFrame's interning for the committer.
func (r *region) frame(f trace.Frame) int32 {
	b := r.b
	if id, ok := b.frameIdx[f]; ok {
		return id
	}
	if id, ok := r.frameNew[f]; ok {
		return id
	}
	id := int32(len(b.frames))
	b.frames = append(b.frames, f)
	r.frameNew[f] = id
	return id
}
