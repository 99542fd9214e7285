package torchsnap

import (
	"encoding/binary"

	"github.com/tracer-dev/tracer/trace"
)

// pworker decodes chunks with tables of its own.
type pworker struct {
	view *regionView
	c    *chunk
	res  *chunkResult
	buf  []byte

	kinds    []int8 // by string id: the trace.Kind it names, -1 none, 0 unknown yet
	strIdx   map[string]int32
	frameIdx map[trace.Frame]int32
	stackKey map[string]int32
	extStack map[uint64]int32
	keyBuf   []byte
	tmp      cev // an entry's event, where the chunk's are records (chunk.recs)
	items    [maxFlatItems]value
	refs     []value
}

// wmark is the size of a worker's tables, to undo a partly decoded entry.
type wmark struct{ memo, strs, frames, lists, stacks int }

func (w *pworker) mark() wmark {
	r := w.res
	return wmark{len(r.memo.k), len(r.strs), len(r.frames), len(r.lists), len(r.stacks)}
}

// undo drops what a partly decoded entry added, its new strings and frames
// from the maps too (flatEntry's entry is decoded again by itemsEntry). The
// stack maps may keep entries past the tables' ends: a stack is made last,
// once nothing can fail, and nothing decodes after a stop.
func (w *pworker) undo(m wmark) {
	r := w.res
	for _, s := range r.strs[m.strs:] {
		delete(w.strIdx, s)
	}
	for _, f := range r.frames[m.frames:] {
		delete(w.frameIdx, f)
	}
	r.memo.truncate(m.memo)
	r.strs, r.frames, r.lists, r.stacks = r.strs[:m.strs], r.frames[:m.frames], r.lists[:m.lists], r.stacks[:m.stacks]
}

// decodeChunk decodes c's entries; a panic (a bug: the input is checked
// everywhere) becomes a fallback to sequential decoding.
func (w *pworker) decodeChunk(c *chunk, res *chunkResult) (_ *chunkResult) {
	defer func() {
		if recover() != nil {
			res = &chunkResult{panic: true}
		}
	}()
	w.c, w.buf = c, c.buf[:c.end]
	*res = chunkResult{memo: wmemo{res.memo.k[:0], res.memo.v[:0]}, strs: res.strs[:0], frames: res.frames[:0],
		lists: res.lists[:0], stacks: res.stacks[:0], items: res.items[:0]}
	w.res = res
	if w.strIdx == nil {
		w.strIdx, w.frameIdx, w.stackKey, w.extStack = map[string]int32{}, map[trace.Frame]int32{}, map[string]int32{}, map[uint64]int32{}
	} else {
		clear(w.strIdx)
		clear(w.frameIdx)
		clear(w.stackKey)
		clear(w.extStack)
	}
	in, pending := c.in, c.pending
	ev, items := 0, 0
	dst, dj, recs := c.dst, 0, c.recs
	buf := w.buf
loop:
	for i := 0; i < len(buf); {
		switch buf[i] {
		case opFrame:
			i += 9
			continue
		case opMark:
			in, pending = true, 0
			i++
			continue
		case opAppends:
			in, pending = false, 0
			i++
			continue
		case opAppend:
			pending = 0
			i++
			continue
		}
		// An entry (the walker saw to it), decoded in its reserved place,
		// or into tmp and packed into its record.
		out := &w.tmp
		if recs == nil {
			for dj == len(dst[0]) {
				dst, dj = dst[1:], 0
			}
			out = &dst[0][dj]
		}
		m := w.mark()
		j, flat, ok := w.entry(i, c.firstEvent+int64(ev), out)
		if !ok {
			w.undo(m)
			res.stopped, res.stopOff = true, i
			break loop
		}
		if !flat {
			items++
		}
		if recs != nil {
			recs[ev].pack(out)
		}
		dj++
		i = j
		ev++
		pending++
	}
	res.n, res.in, res.pending = ev, in, pending
	if recs == nil {
		regionBaseBytes.Add(int64(ev) * evSize)
	}
	if items > 0 {
		regionItemsEntries.Add(int64(items))
	}
	return res
}

// get resolves memo slot idx for a worker.
func (w *pworker) get(idx uint64) (value, bool) {
	if idx < w.view.memoN {
		k, i, ok := w.prefixSlot(idx)
		if !ok {
			return value{}, false
		}
		x := value{k, i}
		switch x.k {
		case vDict, vMark, vWide: // a wide slot: left to the sequential machine
			return value{}, false
		case vList, vTuple:
			return value{vExt, int64(idx)}, true
		}
		return x, true
	}
	if idx < w.c.memoBase {
		return value{vExt, int64(idx)}, true
	}
	if r := idx - w.c.memoBase; r < uint64(len(w.res.memo.k)) && r < uint64(len(w.res.memo.v)) {
		return value{w.res.memo.k[r], w.res.memo.v[r]}, true
	}
	return value{}, false
}

func (w *pworker) memoize(v value) { w.res.memo.set(len(w.res.memo.k), v) }

// wmemo is a chunk's memo slots, kinds and values apart as in memo, so
// that commit adds them to the memo in two copies.
type wmemo struct {
	k []vkind
	v []int64
}

// set stores v in slot i, at most the next one.
func (m *wmemo) set(i int, v value) {
	if i == len(m.k) {
		m.k, m.v = append(m.k, v.k), append(m.v, v.i)
		return
	}
	m.k[i], m.v[i] = v.k, v.i
}

func (m *wmemo) truncate(n int) { m.k, m.v = m.k[:n], m.v[:n] }

// str interns a string: the builder's id if it has one, else a local one.
func (w *pworker) str(p []byte) value {
	if id, ok := w.view.strIdx[string(p)]; ok {
		return value{vStr, int64(id)}
	}
	if id, ok := w.strIdx[string(p)]; ok {
		return value{vLStr, int64(id)}
	}
	s := string(p)
	id := int32(len(w.res.strs))
	w.res.strs = append(w.res.strs, s)
	w.strIdx[s] = id
	return value{vLStr, int64(id)}
}

func (w *pworker) text(v value) (string, bool) {
	switch v.k {
	case vStr:
		if v.i < int64(len(w.view.strs)) {
			return w.view.strs[v.i], true
		}
	case vLStr:
		return w.res.strs[v.i], true
	}
	return "", false
}

// scalar decodes the scalar or string object at buf[i] (a string with its
// MEMOIZE, if any), or a memo reference. ok is false for anything else.
func (w *pworker) scalar(i int) (value, int, bool) {
	buf := w.buf
	if i >= len(buf) {
		return value{}, 0, false
	}
	switch buf[i] {
	case opBinGet:
		if i+2 > len(buf) {
			return value{}, 0, false
		}
		v, ok := w.get(uint64(buf[i+1]))
		return v, i + 2, ok
	case opLongBinGet:
		if i+5 > len(buf) {
			return value{}, 0, false
		}
		v, ok := w.get(uint64(binary.LittleEndian.Uint32(buf[i+1:])))
		return v, i + 5, ok
	case opBinInt1:
		if i+2 > len(buf) {
			return value{}, 0, false
		}
		return intValue(int64(buf[i+1])), i + 2, true
	case opBinInt2:
		if i+3 > len(buf) {
			return value{}, 0, false
		}
		return intValue(int64(binary.LittleEndian.Uint16(buf[i+1:]))), i + 3, true
	case opBinInt:
		if i+5 > len(buf) {
			return value{}, 0, false
		}
		return intValue(int64(int32(binary.LittleEndian.Uint32(buf[i+1:])))), i + 5, true
	case opLong1:
		if i+2 > len(buf) {
			return value{}, 0, false
		}
		n := int(buf[i+1])
		if n > 8 || i+2+n > len(buf) {
			return value{}, 0, false
		}
		var x uint64
		for k := n - 1; k >= 0; k-- {
			x = x<<8 | uint64(buf[i+2+k])
		}
		if n > 0 {
			shift := uint(64 - 8*n)
			x = uint64(int64(x<<shift) >> shift)
		}
		return intValue(int64(x)), i + 2 + n, true
	case opNone:
		return value{}, i + 1, true
	case opNewTrue:
		return boolValue(true), i + 1, true
	case opNewFalse:
		return boolValue(false), i + 1, true
	case opShortBinUni, opBinUnicode:
		var n, h int
		if buf[i] == opShortBinUni {
			if i+2 > len(buf) {
				return value{}, 0, false
			}
			n, h = int(buf[i+1]), 2
		} else {
			if i+5 > len(buf) {
				return value{}, 0, false
			}
			l := binary.LittleEndian.Uint32(buf[i+1:])
			if int64(l) > int64(len(buf)) {
				return value{}, 0, false
			}
			n, h = int(l), 5
		}
		j := i + h + n
		if j > len(buf) {
			return value{}, 0, false
		}
		v := w.str(buf[i+h : j])
		if j < len(buf) && buf[j] == opMemoize {
			w.memoize(v)
			j++
		}
		return v, j, true
	}
	return value{}, 0, false
}

// skipFrames skips FRAME headers at buf[i].
func (w *pworker) skipFrames(i int) int {
	for i+9 <= len(w.buf) && w.buf[i] == opFrame {
		i += 9
	}
	return i
}
