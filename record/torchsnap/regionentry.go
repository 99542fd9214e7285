package torchsnap

import (
	"encoding/binary"

	"github.com/tracer-dev/tracer/trace"
)

// entry decodes the trace entry dict at buf[i] into *out, event evIdx of
// the store (its Seq, as eventStore.add sets it), as flatDict and toEvent
// would, and returns the offset past it and whether flatEntry decoded it.
// ok is false for anything this subset does not cover (*out is then
// undefined).
func (w *pworker) entry(i int, evIdx int64, out *cev) (_ int, flat, ok bool) {
	if j, ok := w.flatEntry(i, evIdx, out); ok {
		return j, true, true
	}
	j, e, ok := w.itemsEntry(i, evIdx)
	if ok {
		e.Seq = evIdx
		*out = e
	}
	return j, false, ok
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
	// The prefix memo's chunk of the first key, as flatEntry's, one
	// indirection closer.
	k0, v0, base := w.keyChunk(buf, j)
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
				if r := idx - base; r < uint64(len(k0)) {
					v = value{k0[r], int64(v0[r])}
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
			case opBinInt1, opBinInt2, opBinInt:
				x, n := binIntAt(p)
				v, j = intValue(x), j+n
			case opLong1:
				x, n := long1At(p)
				if n == 0 {
					return 0, cev{}, false
				}
				v, j = intValue(x), j+n
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
// but *ev and the items buffer (entry then decodes it its own way): what a
// new frames list or string added to the tables and maps is undone.
func (w *pworker) flatEntry(i int, evIdx int64, ev *cev) (int, bool) {
	buf := w.buf
	if i+3 > len(buf) || buf[i] != opEmptyDict || buf[i+1] != opMemoize || buf[i+2] != opMark {
		return 0, false
	}
	// The prefix memo's chunk that holds the first key ("action"), where
	// most keys and the actions' strings are (memoized by the first entry:
	// past the first chunk when the segments before the traces took more
	// slots; keys the segments' blocks have too, addr and size, are in
	// theirs), cut to the prefix's slots and to one length, so that a lookup
	// checks its index once; an index is made relative to the chunk (one
	// below it wraps past its length). Other slots are looked up in their
	// own chunks.
	k0, v0, base := w.keyChunk(buf, i+3)
	m := w.mark()
	slot := m.memo
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
		var key int64
		if r := idx - base; r < uint64(len(k0)) {
			if k0[r] != vStr {
				goto fail
			}
			key = int64(v0[r])
		} else if k, v, ok := w.prefixSlot(idx); ok && k == vStr {
			key = v // a key first memoized elsewhere (by a segment's block)
		} else {
			goto fail
		}
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
			if r := idx - base; r < uint64(len(k0)) {
				v = value{k0[r], int64(v0[r])}
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
		case opBinInt1, opBinInt2, opBinInt:
			x, n := binIntAt(p)
			v, j = intValue(x), j+n
		case opLong1:
			x, n := long1At(p)
			if n == 0 {
				goto fail
			}
			v, j = intValue(x), j+n
		case opNone:
			j++
		case opNewTrue:
			v = boolValue(true)
			j++
		case opNewFalse:
			v = boolValue(false)
			j++
		case opEmptyList: // a new frames list, as itemsEntry reads one
			var ok bool
			if v, j, ok = w.framesList(j); !ok {
				goto fail
			}
		default: // a new string, as itemsEntry reads one
			var ok bool
			if v, j, ok = w.scalar(j); !ok || v.k == vOpen {
				goto fail
			}
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
	w.undo(m)
	return 0, false
done:
	if frames.k != vMark {
		// Last, once nothing can fail: stackOf cannot, for these kinds.
		ev.Stack, _ = w.stackOf(frames)
	}
	w.res.memo.set(slot, value{vEvent, evIdx})
	return j, true
}

// prefixSlot returns the kind and value of the prefix memo's slot idx, as
// stored; ok is false past the prefix.
func (w *pworker) prefixSlot(idx uint64) (vkind, int64, bool) {
	v := w.view
	if idx >= v.memoN {
		return 0, 0, false
	}
	c, o := idx/memoChunk, idx%memoChunk
	if c >= uint64(len(v.memoK)) || c >= uint64(len(v.memoV)) || o >= uint64(len(v.memoK[c])) || o >= uint64(len(v.memoV[c])) {
		return 0, 0, false
	}
	return v.memoK[c][o], int64(v.memoV[c][o]), true
}

// keyChunk returns the prefix memo's chunk that holds the slot buf[j]
// refers to (the entry's first key), cut to the prefix's slots and to one
// length, and the chunk's first slot; an empty chunk if buf[j] is no memo
// reference or its slot is past the prefix.
func (w *pworker) keyChunk(buf []byte, j int) ([]vkind, []int32, uint64) {
	v := w.view
	if j+10 > len(buf) {
		return nil, nil, 0
	}
	first, n := memoRef((*[10]byte)(buf[j : j+10]))
	if n == 0 || first >= v.memoN {
		return nil, nil, 0
	}
	c := first / memoChunk
	if c >= uint64(len(v.memoK)) || c >= uint64(len(v.memoV)) {
		return nil, nil, 0
	}
	base := c * memoChunk
	k, vv := v.memoK[c], v.memoV[c]
	m := min(uint64(len(k)), uint64(len(vv)), v.memoN-base)
	return k[:m], vv[:m], base
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
