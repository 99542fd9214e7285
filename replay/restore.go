package replay

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// gatherRestore collects a reconstructed segment, mapped range of an
// expandable segment, or live block.
func (r *deviceReplay) gatherRestore(ev *trace.Event) error {
	if r.restored {
		return fmt.Errorf("reconstructed event after the trace started")
	}
	if r.obs != nil {
		r.restoreEvs.add(ev)
	}
	conf := r.a.Conf()
	switch ev.Kind {
	case trace.KindSegmentAlloc, trace.KindSegmentMap:
		// The pool of an expandable range is known once its blocks are
		// (applyRestore); a cudaMalloc'd segment is small if it has the
		// small pool's size.
		exp := ev.Kind == trace.KindSegmentMap
		if len(r.restoreSegs) == cap(r.restoreSegs) {
			r.restoreSegs = grow.Double(r.restoreSegs, 0)
		}
		r.restoreSegs = append(r.restoreSegs, allocator.SegmentInfo{Addr: ev.Addr, Size: ev.Size, Stream: ev.Stream,
			Pool: allocator.PoolID{A: ev.Pool.A, B: ev.Pool.B}, Small: !exp && ev.Size == conf.SmallBuffer, Expandable: exp})
		if n := len(r.restoreSegs); n > 1 && r.restoreSegs[n-2].Addr > ev.Addr {
			r.restoreUnsorted = true
		}
	case trace.KindAlloc:
		s := r.restoreSeg(ev.Addr)
		if s == nil {
			return fmt.Errorf("reconstructed block %#x lies in no reconstructed segment", ev.Addr)
		}
		size := ev.BlockSize
		if size == 0 {
			size = conf.RoundSize(ev.Size)
		}
		st := allocator.ActiveAllocated
		if ev.Flags&trace.FlagPending != 0 {
			st = allocator.ActivePendingFree
		}
		r.restoreBlocks.add(allocator.BlockInfo{Addr: ev.Addr, Size: size, Requested: ev.Size, State: st})
		r.live.put(ev.Addr, r.ref(ev), blockRef{addr: ev.Addr})
	default:
		return fmt.Errorf("cannot restore a reconstructed %s", ev.Kind)
	}
	return nil
}

// restoreExamined, when set (by a test), is told of every gathered segment
// restoreSeg examines.
var restoreExamined func()

// restoreSeg returns the gathered segment that holds addr, or nil: a binary
// search of the segments, sorted by address first if they did not come so
// (reconstructed segments do), rather than a scan of all of them per block.
func (r *deviceReplay) restoreSeg(addr uint64) *allocator.SegmentInfo {
	r.sortRestoreSegs()
	segs := r.restoreSegs
	// The first segment above addr; the one before it may hold addr.
	i := sort.Search(len(segs), func(i int) bool {
		if restoreExamined != nil {
			restoreExamined()
		}
		return segs[i].Addr > addr
	})
	if i == 0 {
		return nil
	}
	s := &segs[i-1]
	if addr >= s.Addr+uint64(s.Size) {
		return nil
	}
	return s
}

// sortRestoreSegs sorts the gathered segments by address if they did not
// come so.
func (r *deviceReplay) sortRestoreSegs() {
	if r.restoreUnsorted {
		slices.SortFunc(r.restoreSegs, func(x, y allocator.SegmentInfo) int { return cmp.Compare(x.Addr, y.Addr) })
		r.restoreUnsorted = false
	}
}

// expandablePools decides the pool of each reconstructed mapped range of an
// expandable segment, which its segment_map does not name. A live block
// tells: large-pool blocks are larger than the small-request limit, and
// small-pool ones are not. A range with none is small if the large pool's
// pages do not tile it, else takes the pool of the nearest decided range of
// its stream within one reservation (the pools reserve apart), else the
// large pool.
func expandablePools(segs []allocator.SegmentInfo, conf allocator.Conf, total int64) {
	type rng struct {
		i    int
		kind int8 // 0 unknown, 1 small, 2 large
	}
	var rs []rng
	for i := range segs {
		s := &segs[i]
		if !s.Expandable {
			continue
		}
		var k int8
		switch {
		case len(s.Blocks) > 0 && s.Blocks[0].Size <= conf.SmallSize:
			k = 1
		case len(s.Blocks) > 0:
			k = 2
		case s.Size%conf.LargeSegmentSize != 0:
			k = 1
		}
		rs = append(rs, rng{i, k})
	}
	slices.SortFunc(rs, func(x, y rng) int {
		a, b := &segs[x.i], &segs[y.i]
		return cmp.Or(cmp.Compare(a.Pool.A, b.Pool.A), cmp.Compare(a.Pool.B, b.Pool.B), cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Addr, b.Addr))
	})
	same := func(x, y int) bool {
		a, b := &segs[rs[x].i], &segs[rs[y].i]
		return a.Pool == b.Pool && a.Stream == b.Stream
	}
	// The nearest decided range before and after each range of its stream.
	before, after := make([]int, len(rs)), make([]int, len(rs))
	last := -1
	for x := range rs {
		if last >= 0 && !same(last, x) {
			last = -1
		}
		before[x] = last
		if rs[x].kind != 0 {
			last = x
		}
	}
	last = -1
	for x := len(rs) - 1; x >= 0; x-- {
		if last >= 0 && !same(last, x) {
			last = -1
		}
		after[x] = last
		if rs[x].kind != 0 {
			last = x
		}
	}
	span := uint64(total + total/8)
	for x := range rs {
		s := &segs[rs[x].i]
		k, best := rs[x].kind, span
		for _, y := range []int{before[x], after[x]} {
			if rs[x].kind != 0 || y < 0 {
				continue
			}
			o := &segs[rs[y].i]
			if d := max(o.Addr, s.Addr) - min(o.Addr, s.Addr); d < best {
				k, best = rs[y].kind, d
			}
		}
		s.Small = k == 1 // undecided, with no decided range in reach: large
	}
}

func (r *deviceReplay) applyRestore() error {
	if r.restored {
		return nil
	}
	r.restored = true
	if len(r.restoreSegs) == 0 {
		return nil
	}
	_, total, err := r.dev.MemInfo()
	if err != nil {
		return err
	}
	r.sortRestoreSegs()
	r.restoreBlocks.assign(r.restoreSegs)
	expandablePools(r.restoreSegs, r.a.Conf(), total)
	if err := r.a.Restore(r.restoreSegs); err != nil {
		return err
	}
	for i := range r.restoreSegs {
		r.restoreSegs[i].Blocks = nil // the allocator's now: their memory serves the replay
	}
	// Restore installs the state without events. The observer gets the
	// reconstructed events it came from, as the trace begins with them:
	// the replay then starts from the same segments and live blocks, so a
	// trace written from it is whole and an analysis of it counts them
	// (without them, the frees of restored blocks drove its allocated
	// bytes below zero and its fragmentation negative).
	for _, c := range r.restoreEvs.chunks[:r.restoreEvs.used] {
		for i := range c {
			r.emitEvent(&c[i])
		}
	}
	return nil
}

// restoreChunk is the events in one chunk of a restoreLog (96 KiB).
const restoreChunk = 1024

// restoreLog holds the reconstructed events that the observer gets once the
// state is restored, in chunks of restoreChunk events: adding one never
// copies those held, where a slice grown by append copied each about four
// times over and left its old arrays to the collector (a wrapped history of
// 32,000 segments: 52 MB allocated for 9 MB of events, and the replay's
// time grew faster than the history). A recycled log keeps its chunks.
type restoreLog struct {
	chunks [][]trace.Event // each of capacity restoreChunk; those from used on are empty
	used   int             // chunks holding events
}

// add appends a copy of ev.
func (l *restoreLog) add(ev *trace.Event) {
	if l.used == 0 || len(l.chunks[l.used-1]) == restoreChunk {
		if l.used == len(l.chunks) {
			l.chunks = append(l.chunks, make([]trace.Event, 0, restoreChunk))
		}
		l.used++
	}
	c := &l.chunks[l.used-1]
	*c = append(*c, *ev)
}

// reset empties l and keeps its chunks.
func (l *restoreLog) reset() {
	for i := range l.chunks[:l.used] {
		l.chunks[i] = l.chunks[i][:0]
	}
	l.used = 0
}

// blockChunk and maxBlockChunk are the least and most blocks in one chunk
// of a restoreBlocks (32 and 512 KiB).
const blockChunk, maxBlockChunk = 1024, 16 * 1024

// restoreBlocks holds the gathered live blocks, in the order they came, in
// chunks of as many blocks as came before, from blockChunk to
// maxBlockChunk (the fewer chunk ends, the fewer segments lie across two
// chunks and are copied): adding one never copies those held, where each
// segment's blocks grown by append copied them and left the old arrays to
// the collector, about three times their size. assign then gives each
// segment its blocks in place where they lie in one chunk.
type restoreBlocks struct {
	chunks   [][]allocator.BlockInfo
	n        int
	last     uint64 // the address of the latest block
	unsorted bool   // the blocks did not come in address order
}

// add appends a block.
func (l *restoreBlocks) add(b allocator.BlockInfo) {
	if k := len(l.chunks); k == 0 || len(l.chunks[k-1]) == cap(l.chunks[k-1]) {
		l.chunks = append(l.chunks, make([]allocator.BlockInfo, 0, min(max(l.n, blockChunk), maxBlockChunk)))
	}
	if l.n > 0 && b.Addr < l.last {
		l.unsorted = true
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, b)
	l.n++
	l.last = b.Addr
}

// assign sets the Blocks of each of segs (sorted by address) to the blocks
// that lie from its address up to the next segment's, sorted by address,
// and empties l. A segment's blocks are a slice of the chunk that holds
// them all, or else one slice made to their count. Blocks that did not come
// in address order are sorted (stably) in one slice first.
func (l *restoreBlocks) assign(segs []allocator.SegmentInfo) {
	chunks := l.chunks
	if l.unsorted {
		flat := make([]allocator.BlockInfo, 0, l.n)
		for _, c := range chunks {
			flat = append(flat, c...)
		}
		slices.SortStableFunc(flat, func(x, y allocator.BlockInfo) int { return cmp.Compare(x.Addr, y.Addr) })
		chunks = [][]allocator.BlockInfo{flat}
	}
	*l = restoreBlocks{}
	ci, off := 0, 0 // the next block: chunks[ci][off]
	for i := range segs {
		next := uint64(math.MaxUint64)
		if i+1 < len(segs) {
			next = segs[i+1].Addr
		}
		// Count the segment's blocks, and whether they lie in one chunk.
		c0, o0, k := ci, off, 0
		for ci < len(chunks) && chunks[ci][off].Addr < next {
			k++
			if off++; off == len(chunks[ci]) {
				ci, off = ci+1, 0
			}
		}
		switch {
		case k == 0:
			segs[i].Blocks = nil
		case o0+k <= len(chunks[c0]):
			segs[i].Blocks = chunks[c0][o0 : o0+k : o0+k]
		default:
			bs := make([]allocator.BlockInfo, 0, k)
			for c, o := c0, o0; len(bs) < k; c, o = c+1, 0 {
				bs = append(bs, chunks[c][o:min(len(chunks[c]), o+k-len(bs))]...)
			}
			segs[i].Blocks = bs
		}
	}
}
