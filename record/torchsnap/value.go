package torchsnap

import (
	"fmt"
	"math"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// The decoder never builds a generic object graph for the whole file: a
// snapshot of millions of events would cost several times its size. Instead
// every decoded Python object is a 16-byte value: a kind and one int64 that is
// the number itself, or an index into one of the builder's tables. Strings are
// interned once; dicts that match the snapshot schema (trace entries, frames,
// blocks, segments) are converted to Go structs as soon as they are consumed
// (appended to a list or stored in a dict) and their generic form is recycled.

type vkind uint8

const (
	vNone vkind = iota
	vBool
	vInt     // i is the value
	vUint    // i holds uint64 bits of a value in [2^63, 2^64)
	vBig     // an integer wider than 64 bits; only its existence is kept
	vFloat   // i holds float64 bits
	vStr     // i indexes builder.strs
	vBytes   // a bytes object; contents dropped (snapshots have none)
	vList    // i indexes builder.lists
	vTuple   // i indexes builder.lists
	vDict    // i indexes builder.dicts
	vFrame   // i indexes builder.frames
	vEvent   // i indexes builder.events
	vSkipped // an unknown trace action; i indexes builder.strs (the action)
	vBlock   // i indexes builder.blocks
	vSegment // i indexes builder.segments
	vMark    // pickle MARK on the stack (never stored)
	vWide    // a memo slot whose value is in memo.wide (never outside the memo)
)

var kindNames = [...]string{
	vNone: "None", vBool: "bool", vInt: "int", vUint: "int", vBig: "int", vFloat: "float",
	vStr: "str", vBytes: "bytes", vList: "list", vTuple: "tuple", vDict: "dict",
	vFrame: "frame dict", vEvent: "trace entry dict", vSkipped: "trace entry dict",
	vBlock: "block dict", vSegment: "segment dict", vMark: "mark", vWide: "wide slot",
}

func (k vkind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("vkind(%d)", uint8(k))
}

type value struct {
	k vkind
	i int64
}

func intValue(n int64) value     { return value{vInt, n} }
func floatValue(f float64) value { return value{vFloat, int64(math.Float64bits(f))} }
func boolValue(b bool) value {
	if b {
		return value{vBool, 1}
	}
	return value{vBool, 0}
}

// listObj is a decoded list or tuple. stack caches its conversion to a stack
// id: frames lists are shared by many trace entries, so each is converted
// once. A trace list holds only consecutive events; it is kept as the run
// [evLo, evLo+evN) instead of one value per event (vals stays empty). A
// segment's blocks list that flatBlocks filled is kept likewise as the run
// of block numbers [blkLo, blkLo+blkN).
type listObj struct {
	vals  []value
	stack int32 // -2: not converted yet
	// derived: a listObj made for a compact list (listStore), whose items
	// are its stack's frames, in order; items() builds them if anything
	// asks.
	derived bool
	evLo    int64
	evN     int64
	blkLo   int64
	blkN    int64
}

// listStore holds the builder's lists in chunks, so that growing it never
// copies those already there (a real snapshot makes a list or more per
// trace entry).
//
// A trace entry's frames list is kept as its stack alone (4 bytes instead
// of a listObj's 48): a real training run's snapshot brings a new frames
// list, often empty, in most of its entries, and these were most of the
// decoder's memory. Such a list's index is negative (compact list j is
// -1-j, so that it fits a memo slot's 32 bits, as list indices do); stackOf
// reads its stack directly, and anything else that asks for it (at) gets a
// listObj made for it then, once, derived from the stack.
type listStore struct {
	chunks [][]listObj
	n      int64
	// frames holds the compact lists' stacks (NoStack: empty;
	// pendingStack: not made yet), nFrames of them, in chunks of
	// framesChunk, so that growing it never copies those already there (a
	// list a trace entry and a block).
	frames  [][]int32
	nFrames int64
	first   int             // capacity of the first frames chunk (sizeFor); 0: 1024, grown by append
	made    map[int64]int64 // compact list → the listObj made for it
	// madeFrames, while blockAhead's workers run, has chunks of frames
	// made and faulted in on another core (blockAhead.prepare).
	madeFrames <-chan []int32
	// off, if not nil, is where addFrames makes the frames chunks
	// (decodeWith's): the snapshot refers to none of them.
	off *grow.OffHeap
}

const (
	listChunk    = 4096
	framesChunk  = 1 << 16
	pendingStack = -3
)

func (s *listStore) add(o listObj) int64 {
	if s.n%listChunk == 0 {
		s.chunks = append(s.chunks, make([]listObj, 0, min(listChunk, max(64, int(s.n)))))
	}
	c := &s.chunks[len(s.chunks)-1]
	*c = append(*c, o)
	s.n++
	return s.n - 1
}

// addFrames adds a compact frames list whose stack is stack.
func (s *listStore) addFrames(stack int32) int64 {
	if s.nFrames%framesChunk == 0 {
		var c []int32
		if s.nFrames > 0 && s.madeFrames != nil {
			select {
			case c = <-s.madeFrames:
			default:
			}
		}
		if c == nil {
			// The first chunk grows by append from its size (sizeFor): a
			// small file makes few lists.
			c = makeOff[int32](s.off, 0, int(min(framesChunk, max(1024, int64(s.first), s.nFrames))))
		}
		s.frames = append(s.frames, c)
	}
	k := len(s.frames) - 1
	s.frames[k] = append(s.frames[k], stack)
	s.nFrames++
	return -s.nFrames // -1-j for j = nFrames-1
}

// sizeFor sizes the first frames chunk for a file of size bytes, as
// memo.sizeFor does the memo's: a trace entry (about 80 bytes) or a block
// makes at most one compact list, so a file of a few MB fills the chunk,
// which is then allocated whole rather than grown by append (about 16
// copies from 1,024 lists).
func (s *listStore) sizeFor(size int64) {
	s.first = int(min(size/128, framesChunk))
}

// frame returns compact list j's stack.
func (s *listStore) frame(j int64) *int32 {
	return &s.frames[j/framesChunk][j%framesChunk]
}

// compactStack returns the stack of list i if it is a compact list, made,
// and not asked for as a listObj since.
func (s *listStore) compactStack(i int64) (trace.StackID, bool) {
	if i >= 0 {
		return 0, false
	}
	j := -1 - i
	if len(s.made) != 0 { // none made yet: no map call
		if _, ok := s.made[j]; ok {
			return 0, false
		}
	}
	if *s.frame(j) == pendingStack {
		return 0, false
	}
	return trace.StackID(*s.frame(j)), true
}

func (s *listStore) at(i int64) *listObj {
	if i < 0 {
		i = s.make(-1 - i)
	}
	return &s.chunks[i/listChunk][i%listChunk]
}

// make returns the index of the listObj of compact list j, made the first
// time: derived from its stack, or empty.
func (s *listStore) make(j int64) int64 {
	if i, ok := s.made[j]; ok {
		return i
	}
	o := listObj{stack: *s.frame(j)}
	switch {
	case o.stack >= 0:
		o.derived = true
	case o.stack == pendingStack:
		o.stack = -2 // never reached: only converted entries' lists are memoized
	}
	if s.made == nil {
		s.made = map[int64]int64{}
	}
	i := s.add(o)
	s.made[j] = i
	return i
}

// dictObj is a decoded dict waiting to be recognised or consumed. memo is the
// memo slot that refers to it (-1 none, -2 more than one: never recycled).
type dictObj struct {
	keys []value
	vals []value
	memo int64
}
