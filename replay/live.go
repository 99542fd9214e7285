package replay

import (
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/addrmap"
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// liveBlocks maps a recorded block address to the replayed block, for the
// blocks live (or pending) in the recording. An event numbered by
// BlockNumbers (trace.Event.Ref) finds its block at its number, an array
// index; others, and blocks the numbers no longer name, are kept by
// address in a hash map. Either way it behaves as one map by address: an
// address is in at most one of the two, a put replaces what the address
// held, and a block the recording has freed but the replay keeps (see
// release) moves to the map before its number is given to another block.
type liveBlocks struct {
	byRef  []refSlot // by Ref; 0 unused
	byAddr addrmap.Map[blockRef]
}

// refSlot is a numbered block: its recorded address and the replayed
// block (blockRef's fields, which leave room for used: 24 bytes).
type refSlot struct {
	rec  uint64
	addr uint64
	h    allocator.Handle
	used bool
}

func (s *refSlot) ref() blockRef { return blockRef{s.addr, s.h} }

// slot returns the numbered slot of the block at addr with number n, or
// nil when n does not name it.
func (l *liveBlocks) slot(addr uint64, n int32) *refSlot {
	if n <= 0 || int(n) >= len(l.byRef) {
		return nil
	}
	if s := &l.byRef[n]; s.used && s.rec == addr {
		return s
	}
	return nil
}

// get returns the block at addr (number n, or 0).
func (l *liveBlocks) get(addr uint64, n int32) (blockRef, bool) {
	if s := l.slot(addr, n); s != nil {
		return s.ref(), true
	}
	return l.byAddr.Get(addr)
}

// take removes the block at addr (number n, or 0) and returns it.
func (l *liveBlocks) take(addr uint64, n int32) (blockRef, bool) {
	if b, ok := l.takeNumbered(addr, n); ok {
		return b, true
	}
	return l.byAddr.Take(addr)
}

// takeNumbered is take's numbered case, small enough to inline: false,
// having changed nothing, where n does not name the block at addr (take
// then looks it up by address).
func (l *liveBlocks) takeNumbered(addr uint64, n int32) (blockRef, bool) {
	if s := l.slot(addr, n); s != nil {
		s.used = false
		return s.ref(), true
	}
	return blockRef{}, false
}

// del removes the block at addr (number n, or 0), if any.
func (l *liveBlocks) del(addr uint64, n int32) {
	if s := l.slot(addr, n); s != nil {
		s.used = false
		return
	}
	l.byAddr.Delete(addr)
}

// put makes b the block at addr, numbered n (or 0), replacing the one
// there.
func (l *liveBlocks) put(addr uint64, n int32, b blockRef) {
	if n <= 0 {
		l.byAddr.Put(addr, b)
		return
	}
	if l.byAddr.Len() > 0 {
		l.byAddr.Delete(addr)
	}
	if int(n) >= len(l.byRef) {
		l.grow(n)
	}
	s := &l.byRef[n]
	if s.used && s.rec != addr {
		// Not expected (release moved it), but keep the map's meaning.
		l.byAddr.Put(s.rec, s.ref())
	}
	*s = refSlot{rec: addr, addr: b.addr, h: b.h, used: true}
}

// putNumbered is put's common case, small enough to inline: the block at
// addr has number n > 0 within byRef, the map is empty, and the slot is
// free or addr's. It reports false, having changed nothing, otherwise.
func (l *liveBlocks) putNumbered(addr uint64, n int32, baddr uint64, h allocator.Handle) bool {
	if n <= 0 || int(n) >= len(l.byRef) || l.byAddr.Len() != 0 {
		return false
	}
	s := &l.byRef[n]
	if s.used && s.rec != addr {
		return false
	}
	*s = refSlot{rec: addr, addr: baddr, h: h, used: true}
	return true
}

// grow makes byRef reach number n, out of line: numbers come in order, so
// it is called at most once per number past the greatest so far, and the
// capacity a doubling or a recycled replay left is taken before a new
// array. A full array doubles: append's growth by a quarter leaves old
// arrays that add up to about four times the last one, doubling ones that
// add up to it.
func (l *liveBlocks) grow(n int32) {
	if int(n) >= cap(l.byRef) {
		l.byRef = grow.Double(l.byRef, int(n)+1)
	}
	l.byRef = l.byRef[:cap(l.byRef)]
}

// release is told of a free_completed at addr, numbered n, after the
// replay handled it: BlockNumbers gives n to the next block, so a block
// the replay still keeps at addr moves to the map.
func (l *liveBlocks) release(addr uint64, n int32) {
	if s := l.slot(addr, n); s != nil {
		s.used = false
		l.byAddr.Put(addr, s.ref())
	}
}

// peek loads the address map's slots that the next events evs will look
// up first, in one loop (see deviceReplay.peek), and returns a sum of them.
func (l *liveBlocks) peek(evs []trace.Event) uint64 {
	var sum uint64
	for i := range evs {
		sum += l.byAddr.Peek(evs[i].Addr)
	}
	return sum
}

// clear empties l, keeping its memory.
func (l *liveBlocks) clear() {
	clear(l.byRef)
	l.byRef = l.byRef[:0]
	l.byAddr.Clear()
}
