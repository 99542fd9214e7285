package torchsnap

import (
	"encoding/binary"
	"unsafe"

	"github.com/tracer-dev/tracer/trace"
)

// flatHead converts, for flatEvent, the pairs PyTorch writes first in every
// trace entry, in this order: action, addr, size, stream and time_us, each
// value in the form flatEvent's loop converts itself, then two keys toEvent
// ignores and frames. It returns the offset past the pairs it converted,
// how many (0: none, not even the action's key checked; -1: the entry is
// not one flatEvent converts), and whether one was addr. The action's key
// is matched as the others are: flatEvent looks up the keys' memo chunk
// only for an entry flatHead does not convert whole. It stops at the first pair
// that is not the one expected, or is in another form, leaving it and the
// rest to the loop, which converts them as it would have from the first:
// nothing here changes anything but e and the key references it learns
// (u.heads, u.forms, u.tail). Each key is matched by the bytes of its memo
// reference, as the entry before wrote it, in straight-line code: without
// the loop's dispatch on the key's opcode, its memo lookup and the
// dispatch on the key. The integers' pairs are matched with their value's
// opcode too (pairForm), and the pairs after time_us up to frames' value
// as the bytes they had (headTail).
func (u *unpickler) flatHead(buf []byte, e *flatEntry) (int, int, bool) {
	if r := u.b.memo.rewrites + 1; u.headsEpoch != r {
		// A memo slot was stored again: a reference may name another
		// string now (headsEpoch 0: none learnt yet).
		for j := range u.heads {
			u.heads[j] = keyRef{word: 1} // matches nothing (mask 0)
		}
		for j := range u.actions {
			u.actions[j] = actionRef{keyRef: keyRef{word: 1}}
		}
		u.tail = headTail{}
		for j := range u.forms {
			u.forms[j] = pairForm{word: 1} // matches nothing (mask 0)
		}
		u.headsEpoch = r
	}
	if uint(5+headWindow) > uint(len(buf)) {
		// Near the end of the buffered bytes: the loop converts it all.
		return 0, 0, false
	}
	// Every pair below starts within headWindow of the action's key (at
	// most 5 bytes) and is read as 15 bytes from its start, within buf:
	// at, not a slice, with no bounds check a pair (see headWindow).
	at := func(i int) *[15]byte { return (*[15]byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(buf)), i)) }
	p := at(0)
	_, n0 := u.heads[headAction].match(p)
	if n0 == 0 {
		if _, n0 = u.heads[headAction].learn(p, kAction, &u.b.memo); n0 == 0 {
			return 0, 0, false // flatEvent checks the key
		}
	}
	// The action: a reference to its string, matched against the one
	// learnt in its slot of u.actions (by the index's low byte) without
	// the lookups of the string and its kind.
	p = at(n0)
	act := &u.actions[p[1]%uint8(len(u.actions))]
	_, n := act.match(p)
	if n == 0 {
		if n = act.learn(p, u.b); n == 0 {
			return 0, 0, false
		}
	}
	e.ev.Kind = act.kind
	i := n0 + n
	var x int64
	var m, i5 int
	var q *[10]byte
	// addr (LONG1), size (BININT1, BININT2, BININT or LONG1), stream
	// (BININT1, BININT2 or BININT), time_us (LONG1): each as the form its
	// pair had before (u.forms), else by pairSlow.
	if x, m = u.forms[0].read(at(i)); m == 0 {
		if x, m = u.pairSlow(at(i), 0); m == 0 {
			return i, 1, false
		}
	}
	e.ev.Addr, i = uint64(x), i+m
	if x, m = u.forms[1].read(at(i)); m == 0 {
		// Size's value takes two forms or more in turn (BININT and
		// BININT2): the one before last is tried next.
		if x, m = u.forms[4].read(at(i)); m == 0 {
			if x, m = u.pairSlow(at(i), 1); m == 0 {
				return i, 2, true
			}
		}
	}
	e.ev.Size, i = x, i+m
	if x, m = u.forms[2].read(at(i)); m == 0 {
		if x, m = u.pairSlow(at(i), 2); m == 0 {
			return i, 3, true
		}
	}
	e.ev.Stream, i = uint64(x), i+m
	if x, m = u.forms[3].read(at(i)); m == 0 {
		if x, m = u.pairSlow(at(i), 3); m == 0 {
			return i, 4, true
		}
	}
	e.ev.TimeUs, i = x, i+m
	// The bytes up to frames' value, if the same as an entry's before
	// (u.tail): the same pairs, which memoize the same values.
	if t := &u.tail; t.n != 0 {
		r := (*[32]byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(buf)), i))
		le := binary.LittleEndian
		if (le.Uint64(r[0:8])^t.w[0])&t.m[0]|(le.Uint64(r[8:16])^t.w[1])&t.m[1]|
			(le.Uint64(r[16:24])^t.w[2])&t.m[2]|(le.Uint64(r[24:32])^t.w[3])&t.m[3] == 0 {
			u.flatMemo[0], u.flatMemo[1], e.nm = t.v[0], t.v[1], t.nm
			i += t.n
			q, n = (*[10]byte)(unsafe.Pointer(at(i))), 0
			goto frames
		}
	}
	i5 = i
	// Up to two keys toEvent ignores (compile_context, user_metadata): a
	// short string, interned and memoized as flatValue does, or a
	// reference to what flatItem would accept, skipped as the loop does.
	// Written out twice: as a loop its registers spill, and a method for
	// one pair is not inlined; either costs more than the repeated lines.
	{ // the first
		p = at(i)
		if q, n = u.heads[4].match(p); n == 0 {
			if q, n = u.heads[4].learn(p, -1, &u.b.memo); n == 0 {
				return i, 5, true
			}
		}
		if a, m := memoRef(q); m != 0 {
			// Looked up in the memo's first chunk, as the loop looks it
			// up in the keys' (the same chunk but in a file whose keys
			// are past it, where the loop reads the rest).
			if k0 := u.b.memo.k0; a >= uint64(len(k0)) || k0[a] == vDict || k0[a] == vWide {
				return i, 5, true
			}
			i += n + m
			goto ignored5
		}
		end := i + n + 2 + int(q[1])
		if q[0] != opShortBinUni || q[1] > 7 || e.nm == len(u.flatMemo) { // at most 15 bytes with its key and MEMOIZE
			return i, 5, true
		}
		var v value
		if binary.LittleEndian.Uint64(q[:8])&u.short.mask == u.short.word {
			v = u.short.v
		} else {
			v = u.b.internBytes(buf[i+n+2 : end])
			u.short.learn(q, v)
		}
		if buf[end] == opMemoize {
			u.flatMemo[e.nm] = v
			e.nm++
			end++
		}
		i = end
	}
ignored5:
	{ // the second
		p = at(i)
		if q, n = u.heads[5].match(p); n == 0 {
			if q, n = u.heads[5].learn(p, -1, &u.b.memo); n == 0 {
				return i, 6, true
			}
		}
		if a, m := memoRef(q); m != 0 {
			// Looked up in the memo's first chunk, as the loop looks it
			// up in the keys' (the same chunk but in a file whose keys
			// are past it, where the loop reads the rest).
			if k0 := u.b.memo.k0; a >= uint64(len(k0)) || k0[a] == vDict || k0[a] == vWide {
				return i, 6, true
			}
			i += n + m
			goto ignored6
		}
		end := i + n + 2 + int(q[1])
		if q[0] != opShortBinUni || q[1] > 7 || e.nm == len(u.flatMemo) { // at most 15 bytes with its key and MEMOIZE
			return i, 6, true
		}
		var v value
		if binary.LittleEndian.Uint64(q[:8])&u.short.mask == u.short.word {
			v = u.short.v
		} else {
			v = u.b.internBytes(buf[i+n+2 : end])
			u.short.learn(q, v)
		}
		if buf[end] == opMemoize {
			u.flatMemo[e.nm] = v
			e.nm++
			end++
		}
		i = end
	}
ignored6:
	// frames, by flatValue, as the loop would.
	p = at(i)
	if q, n = u.heads[6].match(p); n == 0 {
		if p[0] == opSetItems { // no frames (a seed's entries)
			return i, 7, true
		}
		if q, n = u.heads[6].learn(p, kFrames, &u.b.memo); n == 0 {
			return i, 7, true
		}
	}
	u.tail.learn(buf[i5:], i+n-i5, &u.flatMemo, e.nm)
frames:
	if q[0] == opEmptyList && q[1] == opMemoize && q[2] != opMark && deriveFrames && e.nm < len(u.flatMemo) {
		// A new empty list, as flatValue converts it (most entries' frames
		// that are not a reference), without the call.
		u.flatMemo[e.nm] = value{vList, u.b.lists.addFrames(int32(trace.NoStack))}
		e.nm++
		e.frames, e.ev.Stack = value{k: vNone}, trace.NoStack
		return i + n + 2, 8, true
	}
	i, ok := u.flatValue(buf, i+n, kFrames, e)
	if !ok {
		return 0, -1, true
	}
	return i, 8, true
}

// headPairs is how many pairs flatHead converts at most; headAction is
// the action key's reference in unpickler.heads, after the others'.
const (
	headPairs  = 8
	headAction = 7
)

// headWindow is how many bytes past the action key flatHead needs
// buffered: the action's value (a reference of at most 5 bytes, read as
// 10), then 7 pairs, each read as 15 bytes from its start and each at most
// 15 bytes long (a key reference of up to 5 bytes, and a LONG1 of up to 8
// bytes, a BININT, a reference, or a string of up to 7 bytes and its
// MEMOIZE); the last pair's value is read within those 15 bytes or by
// flatValue, which checks its own bounds.
const headWindow = 5 + 7*15

// keyRef is a key's memo reference as flatHead last read it: its n bytes
// (BINGET, 2, or LONG_BINGET, 5) as word under mask. A reference names
// the same string while no memo slot is stored again (memo.rewrites).
type keyRef struct {
	word, mask uint64
	n          int
}

// match returns the opcode and argument of the value after the key at p,
// and the key's length, if the key is h's reference; n is 0 if not.
func (h *keyRef) match(p *[15]byte) (q *[10]byte, n int) {
	if binary.LittleEndian.Uint64(p[:8])&h.mask != h.word {
		return nil, 0
	}
	// h.n is 2 or 5 where the mask is not 0 (learn): q lies within p,
	// without a branch on which.
	return (*[10]byte)(unsafe.Add(unsafe.Pointer(p), h.n)), h.n
}

// learn is match for a key h does not hold: if p's key is a reference to
// the string want (-1: any key toEvent ignores) in m, h becomes it.
func (h *keyRef) learn(p *[15]byte, want int64, m *memo) (*[10]byte, int) {
	var idx uint64
	n := 2
	switch p[0] {
	case opBinGet:
		idx = uint64(p[1])
	case opLongBinGet:
		idx, n = uint64(binary.LittleEndian.Uint32(p[1:5])), 5
	default:
		return nil, 0
	}
	k, ok := m.getDense(idx)
	if !ok || k.k != vStr {
		return nil, 0
	}
	if key := k.i; key != want && (want != -1 || key <= kPoolID) {
		return nil, 0
	}
	mask := uint64(1)<<(8*n) - 1
	*h = keyRef{word: binary.LittleEndian.Uint64(p[:8]) & mask, mask: mask, n: n}
	return h.match(p)
}

// actionRef is an action's memo reference (keyRef), and the kind of event
// its string is, as flatHead last read it.
type actionRef struct {
	keyRef
	kind trace.Kind
}

// learn makes p's action, if it is a reference to a string in b's memo of
// a kind b knows, other than an oom, h's, and returns the reference's
// length; 0 if not (the loop then reads the action).
func (h *actionRef) learn(p *[15]byte, b *builder) int {
	a, n := memoRef((*[10]byte)(p[:10]))
	if n == 0 {
		return 0
	}
	s, ok := b.memo.getDense(a)
	if !ok || s.k != vStr {
		return 0
	}
	kind, ok := b.knownKind(s.i)
	if !ok || kind == trace.KindOOM {
		return 0
	}
	mask := uint64(1)<<(8*n) - 1
	*h = actionRef{keyRef{word: binary.LittleEndian.Uint64(p[:8]) & mask, mask: mask, n: n}, kind}
	return n
}

// shortStr is the short string flatHead interned last (compile_context's
// "N/A", written anew in every entry): its SHORT_BINUNICODE opcode, length
// and bytes as word under mask, and v, what internBytes made of it. Bytes
// that match it are the same string, interned to v for the whole decode:
// no call, no comparison of the bytes apart.
type shortStr struct {
	word, mask uint64
	v          value
}

// learn makes q's string, interned as v, h's, if its opcode, length and
// bytes fit a word.
func (h *shortStr) learn(q *[10]byte, v value) {
	if c := uint(q[1]); c <= 6 {
		mask := uint64(1)<<(8*(c+2)) - 1
		*h = shortStr{word: binary.LittleEndian.Uint64(q[:8]) & mask, mask: mask, v: v}
	}
}

// pairSlow reads the pair at p, heads[j]'s (addr, size, stream or
// time_us), whose form is not forms[j]: its key is matched (or learnt) and
// its value read in any form flatHead converts, which forms[j] becomes. It
// returns the value and the pair's length; 0 if it is not such a pair.
func (u *unpickler) pairSlow(p *[15]byte, j int) (int64, int) {
	h := &u.heads[j&3]
	q, n := h.match(p)
	if n == 0 {
		if q, n = h.learn(p, [4]int64{kAddr, kSize, kStream, kTimeUs}[j&3], &u.b.memo); n == 0 {
			return 0, 0
		}
	}
	var x int64
	m := 0
	if j != 0 && j != 3 {
		x, m = binIntAt(q)
	}
	if m == 0 && j != 2 {
		x, m = long1At(q)
	}
	if m == 0 {
		return 0, 0
	}
	if j == 1 {
		u.forms[4] = u.forms[1]
	}
	u.forms[j&3].learn(p, n, m)
	return x, n + m
}

// pairForm is the form of a pair as flatHead last read it: its key's
// reference and its value's opcode (and LONG1's length) as word under mask
// (word 1, mask 0: none; the zero value would match any pair), the pair's
// length n, and where its value lies: voff bytes from the pair's start,
// the bits of vmask, its sign bit sign (0: not signed). A pair that starts
// with the same bytes is the same key with a value of the same length,
// read without a dispatch on its opcode.
type pairForm struct {
	word, mask  uint64
	voff, n     int
	vmask, sign uint64
}

// read returns the value of the pair at p and the pair's length, if p
// starts with f's bytes; 0 if not.
func (f *pairForm) read(p *[15]byte) (int64, int) {
	if binary.LittleEndian.Uint64(p[:8])&f.mask != f.word {
		return 0, 0
	}
	// voff is at most 7 (a key of 5 bytes, LONG1 and its length): the
	// 8 bytes read lie within p.
	w := binary.LittleEndian.Uint64((*[15]byte)(unsafe.Add(unsafe.Pointer(p), f.voff&7))[:8])
	return int64((w&f.vmask)^f.sign) - int64(f.sign), f.n
}

// learn makes the pair at p, a key of n bytes and a value (BININT1,
// BININT2, BININT or LONG1 of up to 8 bytes) of m, f's.
func (f *pairForm) learn(p *[15]byte, n, m int) {
	voff, c, signed := n+1, m-1, true
	switch p[n] {
	case opLong1:
		voff, c = n+2, m-2
	case opBinInt1, opBinInt2:
		signed = false
	}
	*f = pairForm{mask: uint64(1)<<(8*voff) - 1, voff: voff, n: n + m, vmask: ^uint64(0)}
	f.word = binary.LittleEndian.Uint64(p[:8]) & f.mask
	if c < 8 {
		f.vmask = uint64(1)<<(8*c) - 1
	}
	if signed && c > 0 {
		f.sign = uint64(1) << (8*c - 1)
	}
}

// headTail is the bytes of a trace entry from its key after time_us to its
// frames' value (compile_context's and user_metadata's pairs, and frames'
// key), as flatHead last converted them pair by pair: n of them (0: none
// learnt; at most 32) as four words under masks, and the values those
// pairs memoized (nm, at most 2: each a short string). The same bytes are
// the same pairs, converted the same way while the key references hold
// (headsEpoch): a reference's slot is not stored again, a string's bytes
// intern to the same value.
type headTail struct {
	w, m [4]uint64
	n    int
	v    [2]value
	nm   int
}

// learn makes b[:n], whose pairs memoized memo[:nm], h's, if n is at most
// 32 and b holds 32 bytes.
func (h *headTail) learn(b []byte, n int, memo *[maxFlatItems]value, nm int) {
	if n <= 0 || n > 32 || len(b) < 32 || nm > 2 {
		h.n = 0
		return
	}
	for j := range h.w {
		c := min(max(n-8*j, 0), 8)
		h.m[j] = uint64(1)<<(8*c) - 1
		if c == 8 {
			h.m[j] = ^uint64(0)
		}
		h.w[j] = binary.LittleEndian.Uint64(b[8*j:]) & h.m[j]
	}
	h.n, h.v, h.nm = n, [2]value{memo[0], memo[1]}, nm
}
