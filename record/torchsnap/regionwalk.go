package torchsnap

import (
	"bytes"
	"encoding/binary"
	"io"
)

// walk reads the region's bytes into chunk buffers and cuts them into
// chunks, until the list ends or the region is cancelled.
func (r *region) walk() {
	defer r.wg.Done()
	defer close(r.order)
	defer close(r.jobs)
	off := r.start
	var carry []byte
	in, pending := false, 0
	events := r.firstEvent
	memoBase := r.b.memo.n
	eof := false
	grow := 0
	for {
		var buf []byte
		select {
		case buf = <-r.free:
		case <-r.cancel:
			return
		}
		size := max(r.csize, grow, len(carry))
		if cap(buf) < size {
			buf = make([]byte, size)
			chunkRoom.Add(int64(size))
		}
		buf = buf[:size]
		n := copy(buf, carry)
		if !eof && n < len(buf) {
			got, err := r.u.par.ra.ReadAt(buf[n:], off+int64(n))
			n += got
			if err == io.EOF {
				eof = true
			} else if err != nil {
				r.walkErr = err
				return
			}
		}
		buf = buf[:n]
		c := &chunk{buf: buf, off: off, firstEvent: events, memoBase: memoBase, in: in, pending: pending,
			done: make(chan struct{})}
		i, entries, memos, ended := walkChunk(buf, &in, &pending, eof)
		grow = 0
		if i == 0 && !ended {
			// Not one whole item in the buffer: a larger buffer, unless the
			// file ends or the entry is too large.
			if eof || len(buf) >= parMaxEntry {
				ended = true
			} else {
				carry = append(carry[:0:0], buf...)
				grow = 2 * len(buf)
				r.free <- buf[:0]
				continue
			}
		}
		c.end, c.entries = i, entries
		select {
		case r.slots <- struct{}{}:
		case <-r.cancel:
			return
		}
		r.reserve(c)
		events += int64(entries)
		memoBase += uint64(memos)
		r.jobs <- c
		r.order <- c
		if ended {
			r.walkEnd = regionEnd{off: off + int64(i), events: events - r.firstEvent, in: in, pending: pending}
			return
		}
		carry = append([]byte(nil), buf[i:]...) // the start of an incomplete item
		off += int64(i)
	}
}

// parallelWalk cuts the region for the workers without walking it: it
// splits the rest of the file into segments of csize bytes and hands each to
// a worker as a chunk, which walks it itself (scan): a chunk starts at the
// first batch start (isBatchStart) in its segment, found by a byte search,
// and its walk stops at the first batch start past the segment, where the
// next chunk should start. The workers then take the chunks in order
// (sequence): a chunk is part of the region only if it starts exactly where
// the one before stopped. Its predecessor's walk was exact from an exact
// start, so that start is a true batch boundary, not the bytes of a
// string that look like one; the first chunk starts at the region's start.
// Events and memo slots are counted along, so each chunk learns its first
// event and memo slot, and its events' slots are reserved in order.
//
// The serial walk (walk), on one goroutine, would bound the whole region
// on a large host; this one spreads it,
// and the reads, over the workers, leaving only a byte search and the hand
// over in order. Where the cut fails (a start that is not where the chunk
// before stopped, a segment the walk cannot get through in a bounded buffer)
// the region ends before that chunk, in a state the sequential machine goes
// on from, and later regions of the file walk serially.
func (r *region) parallelWalk() {
	defer r.wg.Done()
	defer close(r.order)
	defer close(r.jobs)
	var prev *chunk
	size := r.u.par.size
	for off := r.start; off < size; off += int64(r.csize) {
		select {
		case r.slots <- struct{}{}:
		case <-r.cancel:
			return
		case <-r.stopWalk:
			return
		}
		var buf []byte
		select {
		case buf = <-r.free:
		case <-r.cancel:
			return
		case <-r.stopWalk:
			return
		}
		c := &chunk{raw: buf, seg: off, segEnd: min(off+int64(r.csize), size), prev: prev,
			seqd: make(chan struct{}), done: make(chan struct{})}
		r.jobs <- c
		r.order <- c
		prev = c
	}
}

// scanMargin is how far past its segment a chunk reads at first, for the
// batch start its walk stops at: a batch of CPython's 1000 entries (60 to
// 100 bytes each in real snapshots) or a quarter of the segment. The
// tests' tiny chunks take a quarter, and read more as they need.
func (r *region) scanMargin() int64 {
	if r.csize < 64<<10 {
		return int64(r.csize/4 + 64)
	}
	return int64(max(r.csize/4, 112<<10))
}

// scan reads chunk c's bytes and walks them: from the first batch start in
// its segment (or the region's start) to the first batch start past it. A
// panic (a bug) fails the chunk, which ends the region there.
func (r *region) scan(c *chunk) {
	defer func() {
		if recover() != nil {
			c.failed = true
		}
	}()
	lo := c.seg
	if c.prev != nil {
		lo-- // the APPENDS of a batch start at the segment's first byte
	}
	c.rawOff = lo
	read := func(n int64) (eof bool) {
		have := len(c.raw)
		n = min(n, r.u.par.size-lo)
		if int64(cap(c.raw)) < n {
			// The bytes read, exactly: buffers are reused, one per worker
			// and two more, so their room is memory held through the
			// decode, and a chunk's walk seldom passes the margin (see
			// scanMargin). (make, not append: the room is read into before
			// it is used, and new memory is then not cleared first.)
			grown := make([]byte, have, n)
			chunkRoom.Add(int64(cap(grown)))
			copy(grown, c.raw)
			c.raw = grown
		}
		c.raw = c.raw[:n]
		got, err := r.u.par.ra.ReadAt(c.raw[have:], lo+int64(have))
		c.raw = c.raw[:have+got]
		if err != nil && err != io.EOF {
			panic(err) // a read error: the sequential machine meets it again
		}
		return lo+int64(len(c.raw)) >= r.u.par.size || err == io.EOF
	}
	c.raw = c.raw[:0]
	eof := read(c.segEnd + r.scanMargin() - lo)
	i := int(c.seg - lo)
	if c.prev != nil {
		// The first batch start in the segment.
		to := min(len(c.raw), int(c.segEnd-lo)+len(batchStart)-2)
		p := bytes.Index(c.raw[:to], batchStart)
		if p < 0 {
			c.empty = true
			return
		}
		i = p + 1
	}
	c.start = lo + int64(i)
	stopFrom := int(c.segEnd - lo)
	// A bound on the bytes a chunk may read: a few segments, or a batch of
	// large entries (it frees the tests' tiny chunks of it).
	limit := max(8*int64(r.csize), 1<<20) + r.scanMargin()
	in, pending := false, 0
	for {
		j, entries, memos, st := walkItems(c.raw, i, stopFrom, &in, &pending, eof)
		c.entries += entries
		c.memos += memos
		i = j
		switch st {
		case itemsStop:
			c.stop = lo + int64(i)
			return
		case itemsEnded:
			c.stop, c.ended, c.endIn, c.endPending = lo+int64(i), true, in, pending
			return
		}
		// More bytes, up to a bound: the serial walk takes what this cannot.
		n := int64(len(c.raw)) * 2
		if n > limit {
			c.failed = true
			return
		}
		eof = read(n)
	}
}

// sequence decides, in order, whether chunk c is part of the region (see
// parallelWalk), and if so sets its first event and memo slot and reserves
// its events. It closes c.seqd when done, whatever happens.
func (r *region) sequence(c *chunk) {
	defer close(c.seqd)
	// The region's own start (its memo slot as frozen in the view: the
	// builder's memo grows as chunks commit, on another goroutine).
	st := seqState{off: r.start, event: r.firstEvent, memo: r.view.memoN}
	if c.prev != nil {
		<-c.prev.seqd
		st = c.prev.next
	}
	c.next, c.dead = st, true
	switch {
	case st.over:
		return
	case c.empty:
		return // the predecessor's walk went past this segment
	case c.failed || c.start != st.off:
		// The region ends where the last chunk of it stopped, at a batch
		// start (or the region's start): no batch open there.
		r.mismatch = true
		r.endWalk(regionEnd{off: st.off, events: st.event - r.firstEvent})
		c.next.over = true
		return
	}
	i := int(c.start - c.rawOff)
	c.dead = false
	c.buf, c.off, c.end = c.raw[i:], c.start, int(c.stop-c.start)
	c.firstEvent, c.memoBase = st.event, st.memo
	r.reserve(c)
	c.next = seqState{off: c.stop, event: st.event + int64(c.entries), memo: st.memo + uint64(c.memos)}
	if c.ended {
		r.endWalk(regionEnd{off: c.stop, events: c.next.event - r.firstEvent, in: c.endIn, pending: c.endPending})
		c.next.over = true
	}
}

// endWalk records where the parallel walk ended the region and stops cutting.
func (r *region) endWalk(end regionEnd) {
	r.walkEnd = end
	r.stopWalkOnce.Do(func() { close(r.stopWalk) })
}

// walkChunk walks the items of a region in buf (batch marks, entries,
// appends, frame headers), updating the batch state. It returns the offset
// of the first item not walked, the entries and memo slots before it, and
// whether the region ends there (rather than the buffer).
func walkChunk(buf []byte, in *bool, pending *int, eof bool) (i, entries, memos int, ended bool) {
	i, entries, memos, st := walkItems(buf, 0, len(buf)+1, in, pending, eof)
	return i, entries, memos, st == itemsEnded
}

// How walkItems stopped.
const (
	itemsShort = iota // at the end of buf, before an item it needs more bytes for
	itemsEnded        // at an item the region cannot go past
	itemsStop         // at the first batch start at or past stopFrom
)

// walkItems is walkChunk from buf[i] on, which also stops at the first item
// boundary at or past stopFrom that is a batch start (isBatchStart) with no
// batch open: there, the parallel walk hands over to the next chunk.
func walkItems(buf []byte, i, stopFrom int, in *bool, pending *int, eof bool) (_, entries, memos, st int) {
	short := func() int {
		if eof {
			return itemsEnded
		}
		return itemsShort
	}
	for {
		if i >= stopFrom && !*in && i > 0 && buf[i-1] == opAppends {
			if i+len(batchStart)-1 > len(buf) && !eof {
				return i, entries, memos, itemsShort // cannot tell yet
			}
			if isBatchStart(buf, i) {
				return i, entries, memos, itemsStop
			}
		}
		if i >= len(buf) {
			return i, entries, memos, short()
		}
		switch buf[i] {
		case opFrame:
			if i+9 > len(buf) {
				return i, entries, memos, short()
			}
			i += 9
			continue
		case opMark:
			if *in {
				return i, entries, memos, itemsEnded
			}
			*in, *pending = true, 0
			i++
			continue
		case opAppends:
			if !*in {
				return i, entries, memos, itemsEnded
			}
			*in, *pending = false, 0
			i++
			continue
		case opEmptyDict:
		default:
			return i, entries, memos, itemsEnded
		}
		j, m, wst := walkEntry(buf, i)
		switch wst {
		case walkShort:
			return i, entries, memos, short()
		case walkBad:
			return i, entries, memos, itemsEnded
		}
		if !*in {
			// A batch of one: the entry, then APPEND (after any frame headers).
			for j < len(buf) && buf[j] == opFrame && j+9 <= len(buf) {
				j += 9
			}
			if j >= len(buf) || (buf[j] == opFrame && j+9 > len(buf)) {
				return i, entries, memos, short()
			}
			if buf[j] != opAppend {
				return i, entries, memos, itemsEnded
			}
			j++
		} else {
			*pending++
		}
		i = j
		entries++
		memos += m
	}
}

// batchStart is how CPython starts a batch of trace entries after the
// previous batch's APPENDS: MARK, then the first entry's EMPTY_DICT MEMOIZE
// MARK. The parallel walk cuts chunks at such points (the APPENDS before
// included in the test), where no batch is open.
var batchStart = []byte{opAppends, opMark, opEmptyDict, opMemoize, opMark}

// isBatchStart reports whether buf[i-1:] starts with batchStart.
func isBatchStart(buf []byte, i int) bool {
	return i > 0 && i+len(batchStart)-1 <= len(buf) && string(buf[i-1:i+len(batchStart)-1]) == string(batchStart)
}

const (
	walkOK = iota
	walkShort
	walkBad
)

// walkLen is, by opcode, how walkEntry steps over it: a length, or one of
// the walk* codes below; 0 for opcodes it does not walk.
var walkLen = func() (t [256]int8) {
	for _, op := range []byte{opBinGet, opBinInt1} {
		t[op] = 2
	}
	t[opBinInt2] = 3
	t[opLongBinGet], t[opBinInt] = 5, 5
	for _, op := range []byte{opNone, opNewTrue, opNewFalse, opEmptyList, opEmptyDict, opAppend, opSetItem} {
		t[op] = 1
	}
	t[opBinFloat], t[opFrame] = 9, 9
	t[opLong1], t[opShortBinUni] = walkShortArg, walkShortArg
	t[opBinUnicode] = walkLongArg
	t[opMemoize] = walkMemo
	t[opMark] = walkMark
	t[opSetItems], t[opAppends] = walkPop, walkPop
	return t
}()

const (
	walkShortArg = -1 - iota // a length byte, then that many bytes
	walkLongArg              // a 4-byte length, then that many bytes
	walkMemo
	walkMark
	walkPop
)

// walkEntry walks the entry dict at buf[i] (EMPTY_DICT MEMOIZE MARK …
// SETITEMS) by opcode lengths, and returns the offset past it and its memo
// slots. Only opcodes of plain data are walked: anything else is walkBad.
func walkEntry(buf []byte, i int) (int, int, int) {
	if i+3 > len(buf) {
		return 0, 0, walkShort
	}
	if buf[i+1] != opMemoize || buf[i+2] != opMark {
		return 0, 0, walkBad
	}
	depth, memos := 1, 1
	j := i + 3
	limit := min(len(buf), i+parMaxEntry)
	for j < limit {
		switch l := walkLen[buf[j]]; {
		case l > 0:
			j += int(l)
		case l == walkShortArg:
			if j+1 >= limit {
				return 0, 0, walkShort
			}
			j += 2 + int(buf[j+1])
		case l == walkMemo:
			memos++
			j++
		case l == walkMark:
			depth++
			j++
		case l == walkPop:
			depth--
			if depth == 0 {
				if buf[j] != opSetItems {
					return 0, 0, walkBad
				}
				return j + 1, memos, walkOK
			}
			j++
		case l == walkLongArg:
			if j+5 > limit {
				return 0, 0, walkShort
			}
			j += 5 + int(binary.LittleEndian.Uint32(buf[j+1:]))
		default:
			return 0, 0, walkBad
		}
	}
	if limit < len(buf) {
		return 0, 0, walkBad // longer than parMaxEntry
	}
	return 0, 0, walkShort
}
