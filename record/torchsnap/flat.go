package torchsnap

import (
	"encoding/binary"
	"math"

	"github.com/tracer-dev/tracer/trace"
)

// maxFlatItems bounds the items flatDict collects (keys and values): a trace
// entry has 7 to 10 keys, a frame 3.
const maxFlatItems = 32

// flatDict executes, in one step, the opcodes CPython writes for a dict that
// a list takes next (EMPTY_DICT MEMOIZE MARK key value ... SETITEMS, then
// EMPTY_DICT, APPENDS or APPEND) whose items are scalars, memo references,
// short strings and lists of memo references (a trace entry's frames): the
// shape of nearly every trace entry, so most of a large file. It decodes the
// items straight from the buffer instead of through the pickle stack, and
// leaves the machine in the state the opcodes one by one would: the dict's
// memo slot holds its conversion (or the dict, if it does not convert), the
// memo slots after it the strings and lists memoized inside, and the stack
// the conversion. Anything else (another item opcode, a dict from the memo,
// a memo reference to a slot not yet stored (memo.getDense), a dict that
// runs past the buffered bytes, a FRAME header next) makes it return false,
// and the generic loop runs the same opcodes; what it changed by then
// (strings interned, frames lists created) is invisible to the decoded
// result. A trace entry whose keys are memo references (every one but the
// first few of a file) is flatEvent's, which loop tries first and which
// converts it as it reads it.
func (u *unpickler) flatDict() bool {
	b := u.b
	buf := u.buf[u.pos+3 : u.end] // past EMPTY_DICT MEMOIZE MARK
	// Not local arrays: those would be zeroed on every call.
	items, memoized := &u.flat, &u.flatMemo
	n, nm, i := 0, 0, 0
	for {
		if i+9 >= len(buf) || n == maxFlatItems {
			return false
		}
		if buf[i] == opSetItems {
			break
		}
		v, j, ok := u.flatItem(buf, i, memoized, &nm, false)
		if !ok {
			return false
		}
		items[n] = v
		n++
		i = j
	}
	// What SETITEMS checks, and consumedNext: only a dict the next opcode
	// completes is converted here.
	if n%2 != 0 || n < 2 || !completes(buf[i+1]) {
		return false
	}
	u.pos += 3 + i + 1
	conv, ok := b.convertItems(items[:n])
	if ok {
		// What EMPTY_DICT, MEMOIZE and the conversion by settleItems leave:
		// the memo slot and the stack hold the conversion, and the dict's
		// slot was recycled (conversion reads neither the memo nor dicts).
		b.memo.put(b.memo.n, conv)
	} else {
		// Not a trace entry or frame, or one with a bad field: a plain
		// dict, as SETITEMS leaves it.
		conv = b.newDict()
		u.memoPut(b.memo.n, conv)
		b.reserveDict(conv, n/2)
		for j := 0; j < n; j += 2 {
			b.setItem(conv, items[j], items[j+1]) // cannot fail: conv is a dict, no value is
		}
	}
	for _, v := range memoized[:nm] {
		b.memo.put(b.memo.n, v)
	}
	u.stack = append(u.stack, conv)
	return true
}

// completes reports whether op, after a dict's SETITEMS, completes the dict
// (consumedNext): the next dict, or the APPENDS or APPEND that takes it.
func completes(op byte) bool {
	return op == opEmptyDict || op == opAppends || op == opAppend
}

// flatItem decodes the item (key or value) of a dict for flatDict at
// buf[i], at least 10 bytes before the end of buf: a scalar, a memo
// reference, a short string (noting it in memoized if MEMOIZE follows) or a
// list of memo references (noted in memoized). It returns the item and the
// offset past it; ok is false for anything else, for a memo reference to a
// dict (which the generic path marks shared), and for a reference flatDict
// cannot resolve yet (memo.getDense).
func (u *unpickler) flatItem(buf []byte, i int, memoized *[maxFlatItems]value, nm *int, frames bool) (value, int, bool) {
	b := u.b
	p := (*[10]byte)(buf[i : i+10]) // one bounds check for the opcode and its argument
	var v value
	switch p[0] {
	case opBinGet, opLongBinGet:
		var idx uint64
		if p[0] == opBinGet {
			idx, i = uint64(p[1]), i+2
		} else {
			idx, i = uint64(binary.LittleEndian.Uint32(p[1:5])), i+5
		}
		var ok bool
		if v, ok = b.memo.getDense(idx); !ok || v.k == vDict {
			return value{}, 0, false
		}
	case opBinInt1, opBinInt2, opBinInt:
		x, n := binIntAt(p)
		v, i = intValue(x), i+n
	case opLong1:
		x, n := long1At(p)
		if n == 0 {
			return value{}, 0, false
		}
		v, i = intValue(x), i+n
	case opNone:
		i++
	case opNewTrue:
		v = boolValue(true)
		i++
	case opNewFalse:
		v = boolValue(false)
		i++
	case opShortBinUni:
		c := int(p[1])
		if i+2+c >= len(buf) || *nm == len(memoized) {
			return value{}, 0, false
		}
		v = b.internBytes(buf[i+2 : i+2+c])
		i += 2 + c
		if buf[i] == opMemoize {
			memoized[*nm] = v
			*nm++
			i++
		}
	case opEmptyList:
		// EMPTY_LIST MEMOIZE, then (MARK (BINGET | LONG_BINGET)* APPENDS)*
		// (CPython's batches of 1,000) or nothing.
		if p[1] != opMemoize || *nm == len(memoized) {
			return value{}, 0, false
		}
		j := i + 2
		if frames && deriveFrames && buf[j] == opMark {
			if st, end, ok := u.knownSpan(buf, j+1); ok {
				// The same references as an earlier entry's frames list:
				// the same frames, whose stack is made already.
				v = value{vList, b.lists.addFrames(int32(st))}
				memoized[*nm] = v
				*nm++
				return v, end, true
			}
		}
		refs := u.flatRefs[:0]
		if buf[j] == opMark {
			for j++; ; {
				if j+5 > len(buf) {
					return value{}, 0, false
				}
				var r value
				var ok bool
				switch buf[j] {
				case opAppends:
					if buf[j+1] == opMark {
						j += 2 // CPython's next batch of 1,000
						continue
					}
					j++
					goto appended
				case opBinGet:
					r, ok = b.memo.getDense(uint64(buf[j+1]))
					j += 2
				case opLongBinGet:
					r, ok = b.memo.getDense(uint64(binary.LittleEndian.Uint32(buf[j+1:])))
					j += 5
				}
				if !ok || r.k == vDict {
					return value{}, 0, false
				}
				refs = append(refs, r)
			}
		}
	appended:
		u.flatRefs = refs
		switch {
		case frames && len(refs) == 0 && deriveFrames:
			// A trace entry's empty frames list: compact (listStore).
			v = value{vList, b.lists.addFrames(int32(trace.NoStack))}
		case frames && deriveFrames && allFrames(refs):
			// A trace entry's new frames list (a real run's snapshot has
			// one in most entries): compact, its stack made only once
			// flatEvent converts the entry, as stackOf would make it then
			// (an entry left to flatDict may make no stack at all).
			ids := u.pendingFrames[:0]
			for _, r := range refs {
				ids = append(ids, int32(r.i))
			}
			v = value{vList, b.lists.addFrames(pendingStack)}
			u.pendingFrames, u.pendingList = ids, v.i
		default:
			v = b.newList(vList, nil)
			b.reserveList(v, refs)
			for _, r := range refs {
				b.appendItem(v, r) // cannot fail: v is a list, no r a dict
			}
		}
		memoized[*nm] = v
		*nm++
		i = j
	default:
		return value{}, 0, false
	}
	return v, i, true
}

// flatEvent is flatDict for a trace entry whose keys are memo references,
// the first one "action" (as PyTorch writes them, and as a pickle refers to
// strings it has written before): it converts each item as it reads it, as
// toEvent would, instead of collecting the items and converting them after.
// It returns false, leaving flatDict to decode the dict its own way, for
// anything else, and for any entry toEvent would not convert to an event
// without an error, or would convert otherwise than simply (an unknown
// action, an oom, a pool id, a second frames): it changes nothing before
// then that flatDict would not change as well (strings interned, frames
// lists created).
func (u *unpickler) flatEvent() bool {
	b := u.b
	buf := u.buf[u.pos+3 : u.end : u.end] // past EMPTY_DICT MEMOIZE MARK
	// Zeroed, not copied from a composite literal.
	var e flatEntry
	e.ev.Stack, e.frames.k = trace.NoStack, vMark
	u.pendingList, u.pendingSpan = noList, nil
	// The loop's memo chunk, set only where the loop runs.
	var k0 []vkind
	var v0 []int32
	var first, c, base uint64
	var n, n0 int
	i, head, hasAddr := u.flatHead(buf, &e)
	if head == headPairs {
		if uint(i+15) <= uint(len(buf)) && buf[i] == opSetItems && completes(buf[i+1]) {
			goto done // as the loop's SETITEMS: addr was read
		}
	} else if head < 0 {
		return false
	}
	// The rest by the loop: the first key is "action", as convert expects
	// of a trace entry (flatHead, if it converted any pair, matched it).
	if len(buf) < 10 {
		return false
	}
	first, n = memoRef((*[10]byte)(buf[:10]))
	if n == 0 {
		return false
	}
	// The memo chunk of that key, where most other keys are too (PyTorch's
	// keys are memoized together, by the first entry: in the first chunk
	// unless the segments before the traces took more slots; those the
	// segments' blocks have too, such as size, are in theirs, and looked
	// up in their own chunk): nothing below stores into the memo, so it
	// stays valid. Its kinds and ints are cut to one length, so that a
	// lookup checks its index once; an index is made relative to the chunk
	// (one below it wraps past n0).
	c = first / memoChunk
	if c >= uint64(len(b.memo.k)) || c >= uint64(len(b.memo.v)) {
		return false
	}
	k0, v0, base = b.memo.k[c], b.memo.v[c], c*memoChunk
	n0 = min(len(k0), len(v0))
	k0, v0 = k0[:n0], v0[:n0]
	if a := first - base; a >= uint64(n0) || k0[a] != vStr || v0[a] != kAction {
		return false
	}
	if head < headPairs {
		u.headShort++
	}
	for pairs := head; ; pairs++ {
		// The key, a reference to a string in the memo, and q, the
		// opcode and argument of the value after it. (Compared unsigned,
		// as the slice's bounds check is, which it spares.)
		if uint(i+15) > uint(len(buf)) || pairs == maxFlatItems/2 {
			return false
		}
		p := (*[15]byte)(buf[i : i+15]) // one bounds check for the pair
		var idx uint64
		var q *[10]byte
		switch p[0] {
		case opBinGet:
			idx, q, i = uint64(p[1]), (*[10]byte)(p[2:12]), i+2
		case opLongBinGet:
			idx, q, i = uint64(binary.LittleEndian.Uint32(p[1:5])), (*[10]byte)(p[5:15]), i+5
		case opSetItems:
			if !completes(p[1]) || !hasAddr && !e.addr && needsAddr(e.ev.Kind) { // toEvent reports a missing addr
				return false
			}
			goto done
		default:
			return false
		}
		var key int64
		if r := idx - base; r < uint64(n0) {
			if k0[r] != vStr {
				return false
			}
			key = int64(v0[r])
		} else if k, ok := b.memo.getDense(idx); ok && k.k == vStr {
			key = k.i // memoized elsewhere (a seed's size, by a segment's block)
		} else {
			return false
		}
		// The value, in the opcodes PyTorch writes for its key, converted
		// here as flatValue would; any other, and the values that need
		// calls (frames, strings), by flatValue. Dispatching on the key
		// alone, rather than on the value's opcode and then the key, and
		// keeping those calls' state out of this loop, is what makes this
		// path cheaper than flatValue's.
		switch key {
		case kAction:
			if a, n := memoRef(q); n != 0 {
				// The action string, in the key's chunk or, first written
				// after it (a seed-shaped file's frees), in its own.
				s, ok := value{}, false
				if r := a - base; r < uint64(n0) {
					s, ok = value{k0[r], int64(v0[r])}, true
				} else {
					s, ok = b.memo.getDense(a)
				}
				if !ok || s.k != vStr {
					break
				}
				id := s.i
				kind, ok := b.knownKind(id)
				if !ok {
					kind, ok = b.kindOf(id)
				}
				if !ok || kind == trace.KindOOM {
					return false // skipped, or device_free may follow
				}
				e.ev.Kind, i = kind, i+n
				continue
			}
		case kAddr:
			if x, n := long1At(q); n != 0 {
				e.ev.Addr, i, hasAddr = uint64(x), i+n, true
				continue
			}
		case kSize:
			x, n := binIntAt(q)
			if n == 0 {
				x, n = long1At(q)
			}
			if n != 0 {
				e.ev.Size, i = x, i+n
				continue
			}
		case kStream:
			if x, n := binIntAt(q); n != 0 {
				e.ev.Stream, i = uint64(x), i+n
				continue
			}
		case kTimeUs:
			if x, n := long1At(q); n != 0 {
				e.ev.TimeUs, i = x, i+n
				continue
			}
		case kFrames, kDeviceFree, kPoolID:
		default:
			// A key toEvent ignores (user_metadata): a reference to what
			// flatItem would accept is skipped.
			if a, n := memoRef(q); n != 0 && a-base < uint64(n0) && k0[a-base] != vDict && k0[a-base] != vWide {
				i += n
				continue
			}
		}
		var ok bool
		if i, ok = u.flatValue(buf, i, key, &e); !ok {
			return false
		}
	}
done:
	if e.frames.k != vMark && e.frames.k != vNone {
		// Last, where toEvent converts it in key order: every other field
		// converted, so that a failure leaves nothing flatDict would not.
		if e.frames.k == vList && e.frames.i == u.pendingList {
			// Its frames were noted instead of kept: the stack stackOf
			// would make of them.
			e.ev.Stack = b.internStack(u.pendingFrames)
			*b.lists.frame(-1 - e.frames.i) = int32(e.ev.Stack)
			if u.pendingSpan != nil {
				u.spans.put(u.pendingSpan, e.ev.Stack)
			}
		} else {
			var err error
			if e.ev.Stack, err = b.stackOf(e.frames); err != nil {
				return false
			}
		}
	}
	u.pos += 3 + i + 1
	// What flatDict leaves for a converted dict.
	conv := value{vEvent, b.events.add(&e.ev)}
	if !b.memo.putFits(conv, u.flatMemo[:e.nm]) {
		b.memo.putEach(conv, u.flatMemo[:e.nm])
	}
	u.stack = append(u.stack, conv)
	return true
}

// flatEntry is the trace entry flatEvent converts as it reads it.
type flatEntry struct {
	ev cev
	// frames is the frames' value, converted last (vMark: none yet;
	// vNone: None, or a list whose stack was known as it was read).
	frames value
	nm     int  // the values memoized in the entry, in unpickler.flatMemo
	addr   bool // flatValue read its addr
}

// flatValue converts, for flatEvent, the value of key at buf[i], at least
// 10 bytes before the end of buf, into e, as toEvent would: any value
// flatEvent does not convert itself. It returns the offset past the value;
// ok is false where flatEvent returns false.
func (u *unpickler) flatValue(buf []byte, i int, key int64, e *flatEntry) (int, bool) {
	b := u.b
	q := (*[10]byte)(buf[i : i+10])
	memoized := &u.flatMemo
	switch key {
	case kFrames:
		if e.frames.k != vMark {
			return 0, false
		}
		if a, n := memoRef(q); n != 0 {
			// A list read before: a compact one's stack is made.
			if l, ok := b.memo.getDense(a); ok && l.k == vList {
				if st, ok := b.lists.compactStack(l.i); ok {
					e.frames, e.ev.Stack = value{k: vNone}, st
					return i + n, true
				}
			}
			break
		}
		// A new list (EMPTY_LIST MEMOIZE), empty or with the items of an
		// earlier one (knownSpan): compact, as flatItem makes it.
		if q[0] != opEmptyList || q[1] != opMemoize || !deriveFrames || e.nm == len(memoized) {
			break
		}
		st, end := trace.NoStack, i+2
		if q[2] == opMark {
			var ok bool
			if st, end, ok = u.knownSpan(buf, i+3); !ok {
				break
			}
		}
		memoized[e.nm] = value{vList, b.lists.addFrames(int32(st))}
		e.nm++
		e.frames, e.ev.Stack = value{k: vNone}, st
		return end, true
	case kAction, kAddr, kSize, kStream, kTimeUs, kDeviceFree, kPoolID:
	default:
		// A key toEvent ignores (compile_context): a short string is
		// interned, and memoized, as flatItem does.
		if end := i + 2 + int(q[1]); q[0] == opShortBinUni && end < len(buf) && e.nm < len(memoized) {
			v := b.internBytes(buf[i+2 : end])
			if buf[end] == opMemoize {
				memoized[e.nm] = v
				e.nm++
				end++
			}
			return end, true
		}
	}
	v, i, ok := u.flatItem(buf, i, memoized, &e.nm, key == kFrames)
	if !ok {
		return 0, false
	}
	// As toEvent: the keys it reads, and any error or unusual entry left
	// to it. Integers convert as asInt and asUint do, without their errors.
	isInt := v.k == vInt || v.k == vBool
	switch key {
	case kAction:
		if v.k != vStr {
			return 0, false
		}
		var ok bool
		if e.ev.Kind, ok = b.kindOf(v.i); !ok || e.ev.Kind == trace.KindOOM {
			return 0, false // skipped, or device_free may follow
		}
	case kAddr, kDeviceFree:
		if !isInt && v.k != vUint {
			return 0, false
		}
		e.ev.Addr, e.addr = uint64(v.i), e.addr || key == kAddr
	case kSize:
		if !isInt {
			return 0, false
		}
		e.ev.Size = v.i
	case kStream:
		if !isInt && v.k != vUint {
			return 0, false
		}
		e.ev.Stream = uint64(v.i)
	case kTimeUs:
		if v.k != vNone {
			if !isInt {
				return 0, false
			}
			e.ev.TimeUs = v.i
		}
	case kFrames:
		e.frames = v
	case kPoolID:
		if v.k != vNone {
			return 0, false
		}
	}
	return i, true
}

// noList is an index no list has (compact ones are negative, from -1 down).
const noList = math.MinInt64

// allFrames reports whether every value in vs is a frame.
func allFrames(vs []value) bool {
	for _, v := range vs {
		if v.k != vFrame {
			return false
		}
	}
	return true
}
