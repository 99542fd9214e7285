package torchsnap

import (
	"github.com/tracer-dev/tracer/trace"
)

// framesList decodes a frames list (EMPTY_LIST MEMOIZE, then batches of
// frame dicts or references to them) at buf[i].
func (w *pworker) framesList(i int) (value, int, bool) {
	buf := w.buf
	if i+2 > len(buf) || buf[i+1] != opMemoize {
		return value{}, 0, false
	}
	li := len(w.res.lists)
	w.res.lists = append(w.res.lists, wlist{stack: -2})
	lv := value{vLList, int64(li)}
	w.memoize(lv)
	start := len(w.res.items)
	frames := w.res.items // appended to; the list's are frames[start:]
	j := i + 2
	for {
		j = w.skipFrames(j)
		if j >= len(buf) {
			return value{}, 0, false
		}
		switch buf[j] {
		case opMark:
			j++
			for {
				j = w.skipFrames(j)
				if j >= len(buf) {
					return value{}, 0, false
				}
				if buf[j] == opAppends {
					j++
					break
				}
				f, k, ok := w.frameItem(j)
				if !ok {
					return value{}, 0, false
				}
				frames = append(frames, f)
				j = k
			}
			continue
		case opEmptyDict, opBinGet, opLongBinGet:
			// A batch of one (item APPEND), or the next key after the list.
			if buf[j] != opEmptyDict {
				n := 2
				if buf[j] == opLongBinGet {
					n = 5
				}
				k := w.skipFrames(j + n)
				if k >= len(buf) || buf[k] != opAppend {
					break // the list ended
				}
			}
			f, k, ok := w.frameItem(j)
			if !ok {
				return value{}, 0, false
			}
			k = w.skipFrames(k)
			if k >= len(buf) || buf[k] != opAppend {
				return value{}, 0, false
			}
			frames = append(frames, f)
			j = k + 1
			continue
		}
		break
	}
	// A list of the frames of a stack the worker has already made (the
	// usual case: few distinct stacks, a new list per entry) takes that
	// stack at once and keeps no frames; stackOf would find the same.
	// Only a new stack's frames stay, for the commit to resolve.
	l := &w.res.lists[li]
	if id, ok := w.knownStack(frames[start:]); ok && deriveFrames {
		l.stack = id
		w.res.items = frames[:start]
		return lv, j, true
	}
	w.res.items = frames
	l.frames = frames[start:len(frames):len(frames)]
	return lv, j, true
}

// knownStack returns the local id of the stack of frames, if the worker has
// made it already (trace.NoStack for no frames).
func (w *pworker) knownStack(frames []value) (int32, bool) {
	if len(frames) == 0 {
		return int32(trace.NoStack), true
	}
	id, ok := w.stackKey[string(w.stackKeyOf(frames))]
	return id, ok
}

// frameItem decodes a frames list item: a frame dict or a reference to one.
func (w *pworker) frameItem(i int) (value, int, bool) {
	buf := w.buf
	if buf[i] != opEmptyDict {
		v, j, ok := w.scalar(i)
		if !ok || (buf[i] != opBinGet && buf[i] != opLongBinGet) {
			return value{}, 0, false
		}
		switch v.k {
		case vFrame, vLFrame, vExt:
			return v, j, true
		}
		return value{}, 0, false
	}
	if i+2 > len(buf) || buf[i+1] != opMemoize {
		return value{}, 0, false
	}
	slot := len(w.res.memo.k)
	w.memoize(value{k: vOpen})
	var p [8]value
	n := 0
	j := i + 2
	j = w.skipFrames(j)
	if j < len(buf) && buf[j] == opMark {
		for j++; ; {
			j = w.skipFrames(j)
			if j >= len(buf) {
				return value{}, 0, false
			}
			if buf[j] == opSetItems {
				j++
				break
			}
			if n == len(p) {
				return value{}, 0, false
			}
			v, k, ok := w.scalar(j)
			if !ok || v.k == vOpen {
				return value{}, 0, false
			}
			p[n] = v
			n++
			j = k
		}
	} else {
		for range 2 {
			v, k, ok := w.scalar(j)
			if !ok || v.k == vOpen {
				return value{}, 0, false
			}
			p[n] = v
			n++
			j = w.skipFrames(k)
		}
		if j >= len(buf) || buf[j] != opSetItem {
			return value{}, 0, false
		}
		j++
	}
	if n%2 != 0 || n == 0 {
		return value{}, 0, false
	}
	// As convert: a frame dict has filename (and no action, which would make
	// it a trace entry); toFrame reads filename, name and line.
	var f trace.Frame
	have := false
	for k := 0; k < n; k += 2 {
		key, v := p[k], p[k+1]
		if key.k == vExt {
			return value{}, 0, false
		}
		if key.k != vStr || key.i >= numKeys {
			continue
		}
		var ok bool
		switch key.i {
		case kAction:
			return value{}, 0, false
		case kFilename:
			f.File, ok = w.text(v)
			have = true
		case kName:
			f.Name, ok = w.text(v)
		case kLine:
			var l int64
			l, ok = wInt(v)
			f.Line = trace.LineOf(l)
		default:
			ok = true
		}
		if !ok {
			return value{}, 0, false
		}
	}
	if !have {
		return value{}, 0, false
	}
	var fv value
	if id, ok := w.view.frameIdx[f]; ok {
		fv = value{vFrame, int64(id)}
	} else if id, ok := w.frameIdx[f]; ok {
		fv = value{vLFrame, int64(id)}
	} else {
		id := int32(len(w.res.frames))
		w.res.frames = append(w.res.frames, f)
		w.frameIdx[f] = id
		fv = value{vLFrame, int64(id)}
	}
	w.res.memo.set(slot, fv)
	return fv, j, true
}

// stackKeyOf returns the key of stackKey for frames, in w.keyBuf.
func (w *pworker) stackKeyOf(frames []value) []byte {
	key := w.keyBuf[:0]
	for _, f := range frames {
		key = append(key, byte(f.k), byte(f.i), byte(f.i>>8), byte(f.i>>16), byte(f.i>>24), byte(f.i>>32), byte(f.i>>40))
	}
	w.keyBuf = key
	return key
}

// stackOf returns the local stack id of a frames value, as builder.stackOf.
func (w *pworker) stackOf(v value) (trace.StackID, bool) {
	switch v.k {
	case vNone:
		return trace.NoStack, true
	case vExt:
		if id, ok := w.extStack[uint64(v.i)]; ok {
			return trace.StackID(id), true
		}
		id := int32(len(w.res.stacks))
		w.res.stacks = append(w.res.stacks, wstack{ext: uint64(v.i), isExt: true})
		w.extStack[uint64(v.i)] = id
		return trace.StackID(id), true
	case vLList:
	default:
		return 0, false
	}
	l := &w.res.lists[v.i]
	if l.stack != -2 {
		return trace.StackID(l.stack), true
	}
	if len(l.frames) == 0 {
		l.stack = int32(trace.NoStack)
		return trace.NoStack, true
	}
	key := w.stackKeyOf(l.frames)
	id, ok := w.stackKey[string(key)]
	if !ok {
		id = int32(len(w.res.stacks))
		w.res.stacks = append(w.res.stacks, wstack{frames: l.frames})
		w.stackKey[string(key)] = id
	}
	l.stack = id
	return trace.StackID(id), true
}
