package torchsnap

import (
	"encoding/binary"
	"math"

	"github.com/tracer-dev/tracer/trace"
)

// knownSpan looks up the frames list whose items start at buf[k]: memo
// references (BINGET, LONG_BINGET) up to APPENDS. If an earlier trace
// entry's frames list had the same bytes there, it returns that list's
// stack and the offset past APPENDS. Otherwise it notes the bytes as
// pendingSpan, for flatEvent to remember with the stack it makes of them.
//
// A real training run's snapshot gives most trace entries a frames list of
// their own, but one of a few hundred stacks, by the same references to
// frame dicts memoized once: the bytes name the frames. Comparing them
// spares a memo lookup per frame and the stack's interning. The memo
// references mean the same values as long as no memo slot is written
// again, which no pickle CPython writes does: the cache is dropped if one
// is (memo.rewrites).
func (u *unpickler) knownSpan(buf []byte, k int) (trace.StackID, int, bool) {
	start := k
	// The length and slot of the last span that began with the same 8
	// bytes: if an APPENDS ends one that long here, and the slot holds its
	// bytes, it is that span (a walk over the same bytes would stop
	// there), and needs neither a walk nor a hash.
	var hint *spanHint
	if k+8 <= len(buf) {
		hint = &u.spans.hints[hintHash(binary.LittleEndian.Uint64(buf[k:]))]
		if e := k + int(hint.n); hint.n != 0 && e+5 <= len(buf) && buf[e] == opAppends && buf[e+1] != opMark {
			if st, ok := u.spans.getAt(buf[start:e], uint64(hint.slot), u.b.memo.rewrites); ok {
				return st, e + 1, true
			}
		}
	}
	for {
		if k+5 > len(buf) {
			return 0, 0, false
		}
		switch buf[k] {
		case opAppends:
			if buf[k+1] == opMark {
				k += 2 // the next batch of a list of over 1,000
				continue
			}
			span := buf[start:k]
			slot := spanHash(span)
			if hint != nil && len(span) <= math.MaxUint32 {
				*hint = spanHint{n: uint32(len(span)), slot: uint32(slot)}
			}
			st, ok := u.spans.getAt(span, slot, u.b.memo.rewrites)
			if !ok {
				u.pendingSpan = span
			}
			return st, k + 1, ok
		case opBinGet:
			k += 2
		case opLongBinGet:
			k += 5
		default:
			return 0, 0, false
		}
	}
}

// spanCache maps the bytes of frames lists' items to their stacks, for
// knownSpan: a direct-mapped table of spanSlots entries, hashed from the
// bytes, each keeping a copy of its bytes. A Go map of every span (3,600 of
// them in the real 9.6 MB snapshot, for 38 stacks: CPython makes frame
// dicts anew at times) cost more L1 misses than it saved, and grows with
// the file; the table's size is fixed and it allocates only its keys'
// buffers, once.
type spanCache struct {
	slots []spanSlot
	// hints: by a hash of a span's first 8 bytes, the last span walked
	// that began with them.
	hints [hintSlots]spanHint
	epoch uint64 // memo.rewrites when the slots were filled
}

// spanHint is a span's length (0: none) and slot (spanHash).
type spanHint struct{ n, slot uint32 }

type spanSlot struct {
	key []byte
	st  trace.StackID
}

const (
	spanBits  = 10
	spanSlots = 1 << spanBits
)

// spanCache.hints has hintSlots entries, indexed by hintHash.
const (
	hintBits  = 10
	hintSlots = 1 << hintBits
)

// spanHash hashes span by its 8-byte words; the bytes past the last whole
// one, by the 8 that end span (overlapping it), not one by one.
func spanHash(span []byte) uint64 {
	h := uint64(len(span)) * 0x9E3779B97F4A7C15
	if len(span) < 8 {
		for _, c := range span {
			h = (h ^ uint64(c)) * 0x9E3779B97F4A7C15
		}
		return h >> (64 - spanBits)
	}
	last := binary.LittleEndian.Uint64(span[len(span)-8:])
	for len(span) >= 8 {
		h = (h ^ binary.LittleEndian.Uint64(span)) * 0x9E3779B97F4A7C15
		span = span[8:]
	}
	h = (h ^ last) * 0x9E3779B97F4A7C15
	return h >> (64 - spanBits)
}

// hintHash is the hint slot of a span whose first 8 bytes are w.
func hintHash(w uint64) uint64 {
	return (w * 0x9E3779B97F4A7C15) >> (64 - hintBits)
}

func (c *spanCache) get(span []byte, epoch uint64) (trace.StackID, bool) {
	return c.getAt(span, spanHash(span), epoch)
}

// getAt is get for span's slot (its spanHash, under spanSlots).
func (c *spanCache) getAt(span []byte, slot, epoch uint64) (trace.StackID, bool) {
	if epoch != c.epoch {
		for i := range c.slots {
			c.slots[i].key = c.slots[i].key[:0]
		}
		c.epoch = epoch
		return 0, false
	}
	if c.slots == nil {
		return 0, false
	}
	sl := &c.slots[slot%spanSlots]
	if len(sl.key) > 0 && string(span) == string(sl.key) {
		return sl.st, true
	}
	return 0, false
}

// put remembers span's stack st; span was looked up (get) at the current
// epoch, and nothing was stored in the memo since.
func (c *spanCache) put(span []byte, st trace.StackID) {
	if c.slots == nil {
		c.slots = make([]spanSlot, spanSlots)
	}
	sl := &c.slots[spanHash(span)]
	sl.key, sl.st = append(sl.key[:0], span...), st
}
