package torchsnap

import (
	"bytes"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tracer-dev/tracer/internal/cputime"
)

// Decoding the segments' blocks ahead of the machine.
//
// A snapshot's segments come before its trace, and their block dicts (two
// million in the seed experiment's) would be read on one core while the
// trace after them decodes on all (region.go). So once flatBlocks has taken
// a batch and enough of the file is left, blockAhead's workers read the rest
// of the file in pieces, find in each the places where a batch of block
// dicts may start (MARK EMPTY_DICT MEMOIZE MARK) and read each batch as
// flatBlocks would (blockReader), with a copy of the memo as it was when
// they started. When the machine executes a MARK at one of those places,
// flatBlocks takes the worker's reading instead of reading the batch
// itself (takeAhead), once it has checked on the builder what the worker
// could not: the memo not stored over since, the lists an inactive block
// shares, the frames a list refers to past the copy, a state string
// written past it, and the bytes themselves. A place the machine never executes is never used: a false
// start (the pattern inside a string, say) costs only the worker's time,
// and a batch no worker read the machine reads as before. The machine still
// converts every block, in order, so that blocks, stacks and memo slots are
// numbered as the opcodes one by one would number them.

// aheadBatches counts the batches flatBlocks took from the workers (for
// tests).
var aheadBatches atomic.Int64

// Tunables (variables so that tests can cut small inputs into many pieces).
var (
	// aheadPiece: the batches starting in one piece. Small, for memory:
	// a worker's reading of a block takes 104 bytes (flatBlk) of the 35
	// or so of its pickle, and the workers and the machine hold 2 pieces
	// more than there are workers.
	aheadPiece = 32 << 10
	// aheadMaxBatch bounds a batch the workers read, from its MARK to its
	// APPENDS: the bytes they read past a piece, and what the machine's
	// buffer must hold at once (fill) to check them. CPython's batches
	// of 1,000 block dicts take 35 KB in the seed experiment's snapshot.
	aheadMaxBatch = 96 << 10
	// aheadMaxMemo: with more memo slots than this when the workers would
	// start (an odd file), they do not (their copy of the memo is held
	// until they stop).
	aheadMaxMemo uint64 = 1 << 20
	// aheadWorkers bounds the workers: a worker reads a batch in about the
	// time the decoder takes to convert it, so a few keep ahead, and more
	// would only hold more memory.
	aheadWorkers = 4
)

// dictsStart is how a batch of dicts starts: MARK EMPTY_DICT MEMOIZE MARK.
var dictsStart = []byte{opMark, opEmptyDict, opMemoize, opMark}

type blockAhead struct {
	ra       io.ReaderAt
	size     int64
	view     blockReader // the memo's copy and the strings, shared by the workers
	rewrites uint64      // the memo's rewrites when the copy was made
	jobs     chan *blockPiece
	order    chan *blockPiece // the pieces in file order, for the machine
	free     chan *blockPiece
	cancel   chan struct{}
	wg       sync.WaitGroup
	cur      *blockPiece // the machine's: the piece its offset is in
	// slabs and memos: block slabs and memo chunks made and touched by
	// prepare's goroutine.
	slabs  chan []Block
	memos  chan memoPair
	frames chan []int32
	// For the report (AheadSpan): the bytes cut (start, and end, the
	// cutter's), the CPU of the workers and the cutter, the batches taken.
	start, end int64
	cpu        atomic.Int64
	taken      int64
}

// AheadSpan is what the workers that read the segments' blocks ahead of
// the decoder did (blockahead.go), for the import's stage report
// (TRACER_STAGES): the bytes they cut into pieces, their CPU time, all of
// it within the decode's first sequential part, and the batches of blocks
// the decoder took from them.
type AheadSpan struct {
	Off, End int64
	CPU      time.Duration
	Batches  int64
}

// busy adds the CPU time of the calling goroutine from now until the
// returned function is called to a's; it keeps the goroutine on its thread
// meanwhile.
func (a *blockAhead) busy() func() {
	runtime.LockOSThread()
	t0 := cputime.Thread()
	return func() {
		a.cpu.Add(int64(cputime.Thread() - t0))
		runtime.UnlockOSThread()
	}
}

// blockPiece is a part of the file and the batches read in it.
type blockPiece struct {
	off, end int64  // batches starting at file offsets off to end-1
	buf      []byte // the file from off, up to aheadMaxBatch past end
	batches  []aheadBatch
	blks     []flatBlk
	ids      []int32
	refs     []uint32 // the references of late frames lists
	done     chan struct{}
}

// aheadBatch is a batch a worker read: its MARK's file offset, its length
// through its APPENDS, and its blocks, blks[lo:hi] of its piece (their
// frames in the piece's ids).
type aheadBatch struct {
	off    int64
	n      int
	lo, hi int
}

// startAhead starts the workers on the file past the batch flatBlocks has
// just taken, where there are enough cores and file for them; once per
// decode.
func (u *unpickler) startAhead() {
	u.aheadTried = true
	b := u.b
	workers := regionWorkers()
	off := u.offset()
	if workers < parMinWorkers || u.par.size-off < parMinLeft || b.memo.n > aheadMaxMemo || b.memo.sparse != nil {
		return
	}
	n := b.memo.n
	view := blockReader{memoK: make([]vkind, 0, n), memoV: make([]int32, 0, n), n: n, strs: b.strs}
	for c := range b.memo.k {
		view.memoK = append(view.memoK, b.memo.k[c]...)
		view.memoV = append(view.memoV, b.memo.v[c]...)
	}
	if uint64(len(view.memoK)) != n || uint64(len(view.memoV)) != n {
		return
	}
	view.k0, view.v0 = view.memoK[:min(n, memoChunk)], view.memoV[:min(n, memoChunk)]
	workers = min(workers, aheadWorkers)
	pieces := workers + 2
	a := &blockAhead{ra: u.par.ra, size: u.par.size, view: view, rewrites: b.memo.rewrites, start: off, end: off,
		jobs: make(chan *blockPiece, pieces), order: make(chan *blockPiece, pieces),
		free: make(chan *blockPiece, pieces), cancel: make(chan struct{})}
	for range pieces {
		a.free <- &blockPiece{}
	}
	a.slabs, a.memos, a.frames = make(chan []Block, 1), make(chan memoPair, 1), make(chan []int32, 1)
	b.made, b.memo.made, b.lists.madeFrames = a.slabs, a.memos, a.frames
	a.wg.Add(2 + workers)
	go a.cut(off)
	go a.prepare()
	for range workers {
		go a.work()
	}
	u.ahead = a
}

// stopAhead stops the workers, if any, and waits for them.
func (u *unpickler) stopAhead() {
	a := u.ahead
	if a == nil {
		return
	}
	u.ahead, u.b.made, u.b.memo.made, u.b.lists.madeFrames = nil, nil, nil, nil
	close(a.cancel)
	a.wg.Wait()
	u.b.ahead = AheadSpan{Off: a.start, End: a.end, CPU: time.Duration(a.cpu.Load()), Batches: a.taken}
}

// cut reads the file from off on into pieces, as free ones come back, for
// the workers and the machine.
func (a *blockAhead) cut(off int64) {
	defer a.wg.Done()
	defer a.busy()()
	defer close(a.order)
	defer close(a.jobs)
	for ; off < a.size; off += int64(aheadPiece) {
		var p *blockPiece
		select {
		case <-a.cancel:
			return
		case p = <-a.free:
		}
		end := min(off+int64(aheadPiece), a.size)
		want := int(min(end+int64(aheadMaxBatch), a.size) - off)
		p.buf = slices.Grow(p.buf[:0], want)[:want]
		n, _ := a.ra.ReadAt(p.buf, off)
		p.buf = p.buf[:n] // a short read: what was read (the machine checks the bytes)
		p.off, p.end, a.end = off, end, end
		p.batches, p.blks, p.ids, p.refs = p.batches[:0], p.blks[:0], p.ids[:0], p.refs[:0]
		p.done = make(chan struct{})
		a.jobs <- p // never blocks: both hold every piece
		a.order <- p
		if n == 0 {
			return
		}
	}
}

// prepare makes block slabs for the machine (growBlocks), memo chunks
// (memo.put) and chunks of compact frames lists (listStore.addFrames),
// each touched once a page, so that the page faults of their memory (32
// bytes a block, 5 a memo slot, two slots a block, and 4 a frames list:
// two million blocks in the seed experiment's segments) are taken here,
// not on the machine's thread.
func (a *blockAhead) prepare() {
	defer a.wg.Done()
	defer a.busy()()
	const page = 4096 / int(unsafe.Sizeof(Block{}))
	slab := func() []Block {
		s := make([]Block, blockSlab)
		for i := 0; i < len(s); i += page {
			s[i].Size = 1 // a write: reading a fresh page would map the zero page
		}
		for i := 0; i < len(s); i += page {
			s[i].Size = 0
		}
		return s[:0]
	}
	frames := func() []int32 {
		f := make([]int32, framesChunk)
		for i := 0; i < framesChunk; i += 1024 {
			f[i] = 0
		}
		return f[:0]
	}
	s, m, f := slab(), newMemoPair(), frames()
	for {
		select {
		case <-a.cancel:
			return
		case a.slabs <- s:
			s = slab()
		case a.memos <- m:
			m = newMemoPair()
		case a.frames <- f:
			f = frames()
		}
	}
}

// work reads the batches of the pieces it is given.
func (a *blockAhead) work() {
	defer a.wg.Done()
	defer a.busy()()
	rd := a.view
	for p := range a.jobs {
		select {
		case <-a.cancel:
		default:
			a.read(&rd, p)
		}
		close(p.done)
	}
}

// read reads every batch that starts in piece p with rd, a worker's reader.
func (a *blockAhead) read(rd *blockReader, p *blockPiece) {
	lim := int(p.end - p.off)
	for i := 0; i < lim; {
		j := bytes.Index(p.buf[i:min(len(p.buf), lim+len(dictsStart)-1)], dictsStart)
		if j < 0 {
			return
		}
		i += j
		end, ok, _ := rd.read(p.buf[i+1 : min(len(p.buf), i+1+aheadMaxBatch)])
		if !ok {
			i++
			continue
		}
		lo, base, rbase := len(p.blks), int32(len(p.ids)), int32(len(p.refs))
		p.blks = append(p.blks, rd.blocks...)
		p.ids = append(p.ids, rd.ids...)
		p.refs = append(p.refs, rd.refs...)
		for k := lo; k < len(p.blks); k++ {
			f := &p.blks[k]
			if f.late {
				f.lo, f.hi = f.lo+rbase, f.hi+rbase
			} else {
				f.lo, f.hi = f.lo+base, f.hi+base
			}
		}
		p.batches = append(p.batches, aheadBatch{off: p.off + int64(i), n: 1 + end, lo: lo, hi: len(p.blks)})
		i += 1 + end
	}
}

// takeAhead converts the batch at the machine's MARK, appending its blocks to
// list, if a worker read it and it holds: see blockAhead. It returns false,
// having changed nothing the machine reads, where flatBlocks must read the
// batch itself.
func (u *unpickler) takeAhead(list value) bool {
	a, b := u.ahead, u.b
	off := u.offset()
	for a.cur == nil || off >= a.cur.end {
		if a.cur != nil {
			<-a.cur.done
			a.free <- a.cur // never blocks: it holds every piece
			a.cur = nil
		}
		p, ok := <-a.order
		if !ok {
			u.stopAhead()
			return false
		}
		a.cur = p
	}
	p := a.cur
	if off < p.off {
		return false
	}
	<-p.done
	k, found := slices.BinarySearchFunc(p.batches, off, func(bt aheadBatch, off int64) int {
		switch {
		case bt.off < off:
			return -1
		case bt.off > off:
			return 1
		}
		return 0
	})
	if !found || b.memo.rewrites != a.rewrites {
		return false
	}
	bt := p.batches[k]
	if u.end-u.pos < bt.n && (bt.n > readBuf || u.fill(bt.n) != nil || u.end-u.pos < bt.n) {
		return false
	}
	start := int(bt.off - p.off)
	if !bytes.Equal(u.buf[u.pos:u.pos+bt.n], p.buf[start:start+bt.n]) {
		return false
	}
	blks := p.blks[bt.lo:bt.hi]
	k0, v0 := b.memo.k0, b.memo.v0
	n0 := uint64(min(len(k0), len(v0)))
	for j := range blks {
		f := &blks[j]
		if f.lateState {
			// As blockReader.read checks a state on the machine's memo.
			s := uint64(f.state)
			if s >= n0 || k0[s] != vStr {
				return false
			}
			st, err := parseBlockState(b.strs[v0[s]])
			if err != nil {
				return false
			}
			f.bl.State, f.lateState = st, false
		}
		switch {
		case f.lateRef:
			v, ok := b.memo.getDense(uint64(f.ref.i))
			if !ok || !b.sharedFrames(v) {
				return false
			}
			f.ref, f.lateRef = v, false
		case f.late:
			lo := len(p.ids)
			for _, r := range p.refs[f.lo:f.hi] {
				v, ok := b.memo.getDense(uint64(r))
				if !ok || v.k != vFrame {
					p.ids = p.ids[:lo]
					return false
				}
				p.ids = append(p.ids, int32(v.i))
			}
			f.lo, f.hi, f.late = int32(lo), int32(len(p.ids)), false
		}
		if f.frames && !f.empty && f.span != nil {
			if st, ok := u.spans.get(f.span, b.memo.rewrites); ok {
				f.st, f.known = st, true
			}
		}
	}
	u.pos += bt.n
	u.convertBlocks(list, blks, p.ids)
	aheadBatches.Add(1)
	a.taken++
	return true
}
