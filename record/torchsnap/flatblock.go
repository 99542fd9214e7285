package torchsnap

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/tracer-dev/tracer/trace"
)

// Tests: noFlatBlocks leaves every block dict to the general path;
// flatBlocksRead counts those flatBlocks converted; ownAhead counts the
// batches it read on the machine's goroutine while blockAhead's workers
// were reading.
var (
	noFlatBlocks   bool
	flatBlocksRead atomic.Int64
	ownAhead       atomic.Int64
)

// maxFlatBlocks bounds the block dicts of one batch flatBlocks takes
// (CPython writes 1,000 between APPENDS).
const maxFlatBlocks = 4096

// flatBlk is a block dict flatBlocks has read and not yet converted.
type flatBlk struct {
	bl blockRec
	// The frames list's items: span (the bytes of its memo references,
	// for the span cache) and, unless the cache knew them, their frame
	// ids, ids[lo:hi] of flatBlocks' scratch. frames: the dict has a
	// frames key; known: st is the span's stack, from the cache.
	span         []byte
	lo, hi       int32
	st           trace.StackID
	frames       bool
	known, empty bool
	// shared: the frames are a list from before the batch (ref), whose
	// stack stackOf makes without interning one (see sharedFrames).
	shared bool
	ref    value
	// Of a blockAhead worker's reading, for the commit: lateRef, ref.i
	// is the memo slot of shared frames; late, the frames list refers to
	// slots past the worker's copy of the memo, and lo and hi index its
	// references, not its frames; lateState, the state is the string in
	// memo slot state, past the copy (a state first written after the
	// workers started: inactive, in a snapshot whose first batch has no
	// inactive block).
	lateRef, late, lateState bool
	state                    uint32
}

// flatBlocks executes, in one step, a batch of a segment's block dicts
// appended to the list below the MARK at u.pos (MARK, then EMPTY_DICT
// MEMOIZE MARK key value ... SETITEMS for each, then APPENDS): the shape of
// every segment's blocks in a snapshot, which come before the trace. Each
// key must be a memo reference to one of address, size, requested_size,
// state and frames (each once, state present), the address and sizes
// integers in the opcodes PyTorch writes, the state a reference to a known
// state string, and the frames a new list (EMPTY_LIST MEMOIZE) of
// references to frames stored before the batch. It reads the whole batch
// first (or takes it as blockAhead's workers read it) and returns false,
// having changed nothing, if anything differs or the batch runs past the
// buffered bytes; then it converts the blocks in order, as APPENDS settling
// them one by one would (toBlock: the stack, then the block's number), and
// leaves the memo, the list and the stack as the opcodes one by one would,
// but for each frames list, which is compact (listStore), as a trace
// entry's is.
func (u *unpickler) flatBlocks() bool {
	b := u.b
	if b.memo.sparse != nil || len(u.stack) == 0 || (len(u.marks) > 0 && u.marks[len(u.marks)-1] == len(u.stack)) {
		return false
	}
	list := u.stack[len(u.stack)-1]
	if list.k != vList || !deriveFrames || noFlatBlocks {
		return false
	}
	if u.ahead != nil && u.takeAhead(list) {
		return true
	}
	rd := &u.blockRd
	rd.seq(b, &u.spans)
	defer rd.seq(nil, nil)
	i, ok, short := rd.read(u.buf[u.pos+1 : u.end : u.end])
	if short && u.pos > 0 && u.srcErr == nil {
		// The batch runs past the buffer: move what is left to its start,
		// read on, and read the batch again. What fill reports (the end
		// of the file, the decoder's bound) the general path meets too.
		u.fill(u.end - u.pos + 1)
		i, ok, _ = rd.read(u.buf[u.pos+1 : u.end : u.end])
	}
	if !ok {
		return false
	}
	u.pos += 1 + i
	if u.ahead != nil {
		ownAhead.Add(1)
	}
	u.convertBlocks(list, rd.blocks, rd.ids)
	if u.par != nil && u.ahead == nil && !u.aheadTried {
		u.startAhead()
	}
	return true
}

// convertBlocks converts the blocks flatBlocks read (their frames ids[lo:hi]
// of each) and appends them to list: their stacks in order, then the
// blocks and their memo slots (the block, then its frames list, if any)
// each as one run, as toBlock and a memo store each would have.
func (u *unpickler) convertBlocks(list value, blks []flatBlk, ids []int32) {
	b := u.b
	flatBlocksRead.Add(int64(len(blks)))
	keep := int64(0)
	if o := b.lists.at(list.i); o.blkN > 0 && o.blkLo+o.blkN == b.blockBase+b.nBlocks {
		keep = o.blkN // the list's blocks so far: its run moves on with it
	}
	b.room(keep, int64(len(blks)))
	first := b.blockBase + b.nBlocks
	ks, vs := u.slotKinds[:0], u.slotInts[:0]
	for j := range blks {
		f := &blks[j]
		st := trace.NoStack
		switch {
		case f.shared:
			st, _ = b.stackOf(f.ref) // cannot fail: see sharedFrames
		case !f.frames:
		case f.known:
			st = f.st
		case !f.empty:
			st = b.internStack(ids[f.lo:f.hi])
			if f.span != nil {
				u.spans.put(f.span, st)
			}
		}
		f.bl.Stack = st
		ks, vs = append(ks, vBlock), append(vs, int64(first)+int64(j))
		if f.frames {
			ks, vs = append(ks, vList), append(vs, b.lists.addFrames(int32(st)))
		}
	}
	b.addBlocks(blks)
	b.memo.putRun(ks, vs)
	u.slotKinds, u.slotInts = ks, vs
	b.appendBlocks(list, first, int64(len(blks)))
}

// blockReader reads batches of block dicts for flatBlocks: the sequential
// machine's (b set: the memo as it is, and the span cache), or a worker's
// of blockAhead (b nil: a copy of the memo's first n slots, taken when the
// workers started, and no cache). A worker leaves to the commit what it
// cannot know (late): a frames list with references past its copy, and an
// inactive block's reference to a list from before the batch, whose stack
// sharedFrames checks on the builder.
type blockReader struct {
	b      *builder
	spans  *spanCache
	k0     []vkind // the memo's first chunk: the keys' and states' slots
	v0     []int32
	memoK  []vkind // a worker's copy of slots 0 to n-1
	memoV  []int32
	n      uint64
	strs   []string
	blocks []flatBlk
	ids    []int32
	refs   []uint32 // a worker's: the memo references of lists late
}

// seq points rd at the builder as it is now, for the sequential machine;
// seq(nil, nil), once it has read, lets go of the builder's tables.
func (rd *blockReader) seq(b *builder, spans *spanCache) {
	rd.b, rd.spans = b, spans
	if b == nil {
		rd.k0, rd.v0, rd.strs = nil, nil, nil
		return
	}
	k0, v0 := b.memo.k0, b.memo.v0
	n0 := min(len(k0), len(v0))
	rd.k0, rd.v0, rd.strs = k0[:n0], v0[:n0], b.strs
}

// get returns memo slot r; late is true when a worker's copy does not hold
// it.
func (rd *blockReader) get(r uint64) (v value, ok, late bool) {
	if rd.b != nil {
		v, ok = rd.b.memo.getDense(r)
		return v, ok, false
	}
	if r >= rd.n {
		return value{}, false, true
	}
	if k := rd.memoK[r]; k != vWide {
		return value{k, int64(rd.memoV[r])}, true, false
	}
	return value{}, false, false
}

// read reads the block dicts of the batch at buf (just past its MARK) into
// rd.blocks, and returns the offset past its APPENDS; ok is false for
// anything flatBlocks does not take, and short also true if that was the
// end of buf. A FRAME header may come before any object (CPython's framer
// ends a frame between two), so one is skipped wherever a key, a value, a
// frame reference, a dict or the end of one can come.
func (rd *blockReader) read(buf []byte) (end int, ok, short bool) {
	k0, v0, n0 := rd.k0, rd.v0, len(rd.k0)
	strs := rd.strs
	blks, ids := rd.blocks[:0], rd.ids[:0]
	rd.refs = rd.refs[:0]
	defer func() { rd.blocks, rd.ids = blks, ids }()
	i := 0
	lastState, lastStateID := BlockState(0), int64(-1)
	for {
		// EMPTY_DICT MEMOIZE MARK, or the batch's APPENDS.
		i = skipFrame(buf, i)
		if i+3 > len(buf) {
			return 0, false, true
		}
		if buf[i] == opAppends {
			return i + 1, len(blks) > 0, false
		}
		if buf[i] != opEmptyDict || buf[i+1] != opMemoize || buf[i+2] != opMark || len(blks) == maxFlatBlocks {
			return 0, false, false
		}
		i += 3
		f := flatBlk{bl: blockRec{Block: Block{Stack: trace.NoStack}}}
		var have uint64
		for {
			// The key, a reference to a string of the memo's first chunk,
			// and q, the opcode and argument of the value after it.
			if i = skipFrame(buf, i); i+10 > len(buf) {
				return 0, false, true
			}
			if buf[i] == opSetItems {
				i++
				break
			}
			a, n := memoRef((*[10]byte)(buf[i : i+10]))
			if n == 0 || a >= uint64(n0) || k0[a] != vStr {
				return 0, false, false
			}
			key := int64(v0[a])
			if key >= numKeys || have&(1<<key) != 0 {
				return 0, false, false
			}
			have |= 1 << key
			if i = skipFrame(buf, i+n); i+10 > len(buf) {
				return 0, false, true
			}
			q := (*[10]byte)(buf[i : i+10])
			switch key {
			case kAddress:
				x, n := long1At(q)
				if n == 0 {
					x, n = binIntAt(q)
				}
				if n == 0 {
					return 0, false, false
				}
				f.bl.Addr, f.bl.hasAddr, i = uint64(x), true, i+n
			case kSize, kRequestedSize:
				x, n := binIntAt(q)
				if n == 0 {
					x, n = long1At(q)
				}
				if n == 0 {
					return 0, false, false
				}
				if key == kSize {
					f.bl.Size = x
				} else {
					f.bl.RequestedSize = x
				}
				i += n
			case kState:
				s, n := memoRef(q)
				if n != 0 && rd.b == nil && s >= rd.n && s < memoChunk {
					f.lateState, f.state, i = true, uint32(s), i+n
					continue
				}
				if n == 0 || s >= uint64(n0) || k0[s] != vStr {
					return 0, false, false
				}
				if id := int64(v0[s]); id != lastStateID {
					st, err := parseBlockState(strs[id])
					if err != nil {
						return 0, false, false
					}
					lastState, lastStateID = st, id
				}
				f.bl.State, i = lastState, i+n
			case kFrames:
				if r, n := memoRef(q); n != 0 {
					// A list from before the batch (an inactive block's).
					f.shared, i = true, i+n
					if rd.b == nil {
						f.ref, f.lateRef = value{i: int64(r)}, true
						continue
					}
					v, ok := rd.b.memo.getDense(r)
					if !ok || !rd.b.sharedFrames(v) {
						return 0, false, false
					}
					f.ref = v
					continue
				}
				// EMPTY_LIST MEMOIZE, then MARK refs APPENDS (batches of
				// 1,000), or nothing.
				if q[0] != opEmptyList || q[1] != opMemoize {
					return 0, false, false
				}
				f.frames = true
				if i += 2; q[2] != opMark {
					f.empty = true
					continue
				}
				i++
				start, framed := i, false
				f.lo = int32(len(ids))
				rlo := len(rd.refs)
				for {
					if j := skipFrame(buf, i); j != i {
						i, framed = j, true
					}
					if i+5 > len(buf) {
						return 0, false, true
					}
					var r uint64
					switch buf[i] {
					case opAppends:
						if buf[i+1] == opMark {
							i += 2
							continue
						}
						goto listed
					case opBinGet:
						r, i = uint64(buf[i+1]), i+2
					case opLongBinGet:
						r, i = uint64(binary.LittleEndian.Uint32(buf[i+1:])), i+5
					default:
						return 0, false, false
					}
					if rd.b == nil {
						rd.refs = append(rd.refs, uint32(r))
					}
					v, ok, late := rd.get(r)
					if late {
						f.late = true
						continue
					}
					if !ok || v.k != vFrame {
						return 0, false, false
					}
					ids = append(ids, int32(v.i))
				}
			listed:
				f.hi = int32(len(ids))
				if !framed {
					f.span = buf[start:i]
				}
				i++ // APPENDS
				switch {
				case f.late:
					// The commit resolves the list's references, refs[lo:hi].
					ids = ids[:f.lo]
					f.lo, f.hi = int32(rlo), int32(len(rd.refs))
				case f.hi == f.lo:
					f.empty = true
				case rd.spans == nil:
					rd.refs = rd.refs[:rlo]
				default:
					if st, ok := rd.spans.get(f.span, rd.b.memo.rewrites); ok && f.span != nil {
						f.st, f.known = st, true
					}
				}
			default:
				return 0, false, false
			}
		}
		if i = skipFrame(buf, i); i >= len(buf) {
			return 0, false, true
		}
		if have&(1<<kState) == 0 || (buf[i] != opEmptyDict && buf[i] != opAppends) {
			return 0, false, false
		}
		blks = append(blks, f)
	}
}

// skipFrame returns the offset past the FRAME headers at buf[i], if there
// are any, whole; else i.
func skipFrame(buf []byte, i int) int {
	for i < len(buf) && buf[i] == opFrame && i+9 <= len(buf) {
		i += 9
	}
	return i
}

// sharedFrames reports whether v, the frames of a block dict, is a list
// whose stack stackOf returns without an error and without interning a
// stack: one made already, or an empty list (as PyTorch gives every
// inactive block the one empty list).
func (b *builder) sharedFrames(v value) bool {
	if v.k != vList {
		return false
	}
	if v.i < 0 {
		_, ok := b.lists.compactStack(v.i)
		return ok
	}
	l := b.lists.at(v.i)
	return l.stack != -2 || len(l.vals) == 0 && l.evN == 0 && l.blkN == 0 && !l.derived
}
