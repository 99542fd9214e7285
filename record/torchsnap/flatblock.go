package torchsnap

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/tracer-dev/tracer/trace"
)

// Tests: noFlatBlocks leaves every block dict to the general path;
// flatBlocksRead counts those flatBlocks converted.
var (
	noFlatBlocks   bool
	flatBlocksRead atomic.Int64
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
}

// flatBlocks executes, in one step, a batch of a segment's block dicts
// appended to the list below the MARK at u.pos (MARK, then EMPTY_DICT
// MEMOIZE MARK key value ... SETITEMS for each, then APPENDS): the shape of
// every segment's blocks in a snapshot, which come before the trace and so
// are decoded sequentially, even on many cores. Each key must be a memo
// reference to one of address, size, requested_size, state and frames
// (each once, state present), the address and sizes integers in the
// opcodes PyTorch writes, the state a reference to a known state string,
// and the frames a new list (EMPTY_LIST MEMOIZE) of references to frames
// stored before the batch. It reads the whole batch first and returns false,
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
	i, ok, short := u.readBlocks(u.buf[u.pos+1 : u.end : u.end])
	if short && u.pos > 0 && u.srcErr == nil {
		// The batch runs past the buffer: move what is left to its start,
		// read on, and read the batch again. What fill reports (the end
		// of the file, the decoder's bound) the general path meets too.
		u.fill(u.end - u.pos + 1)
		i, ok, _ = u.readBlocks(u.buf[u.pos+1 : u.end : u.end])
	}
	if !ok {
		return false
	}
	flatBlocksRead.Add(int64(len(u.blocks)))
	blks := u.blocks
	convs := u.blockVals[:0]
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
			st = b.internStack(u.blockIDs[f.lo:f.hi])
			if f.span != nil {
				u.spans.put(f.span, st)
			}
		}
		f.bl.Stack = st
		conv := value{vBlock, b.addBlock(f.bl)}
		if f.frames {
			u.flatMemo[0] = value{vList, b.lists.addFrames(int32(st))}
			b.memo.putNext(conv, u.flatMemo[:1])
		} else {
			b.memo.putNext(conv, nil)
		}
		convs = append(convs, conv)
	}
	u.blockVals = convs
	u.pos += 1 + i
	b.reserveList(list, convs)
	for _, v := range convs {
		b.appendItem(list, v) // cannot fail: list is a list, no v a dict
	}
	return true
}

// readBlocks reads, for flatBlocks, the block dicts of the batch at buf
// (just past its MARK) into u.blocks, and returns the offset past its
// APPENDS; ok is false for anything flatBlocks does not take, and short
// also true if that was the end of buf. A FRAME header may come before any
// object (CPython's framer ends a frame between two), so one is skipped
// wherever a key, a value, a frame reference, a dict or the end of one can
// come.
func (u *unpickler) readBlocks(buf []byte) (end int, ok, short bool) {
	b := u.b
	k0, v0 := b.memo.k0, b.memo.v0
	n0 := min(len(k0), len(v0))
	k0, v0 = k0[:n0], v0[:n0]
	strs := b.strs
	blks, ids := u.blocks[:0], u.blockIDs[:0]
	defer func() { u.blocks, u.blockIDs = blks, ids }()
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
					v, ok := b.memo.getDense(r)
					if !ok || !b.sharedFrames(v) {
						return 0, false, false
					}
					f.shared, f.ref, i = true, v, i+n
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
					v, ok := b.memo.getDense(r)
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
				if f.hi == f.lo {
					f.empty = true
				} else if st, ok := u.spans.get(f.span, b.memo.rewrites); ok && f.span != nil {
					f.st, f.known = st, true
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
	return l.stack != -2 || len(l.vals) == 0 && l.evN == 0 && !l.derived
}
