package torchsnap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/tracer-dev/tracer/internal/grow"
)

// errNotSnapshot prefixes errors about files that are valid input of some
// kind, but not a snapshot.
const notSnapshot = "not a PyTorch memory snapshot: "

// unpickler executes pickle opcodes onto a builder. It reads through its own
// buffer rather than a bufio.Reader: one opcode is a few bytes, and an index
// into a slice is several times cheaper than a ReadByte call.
type unpickler struct {
	src      io.Reader
	buf      []byte
	pos, end int
	off      int64 // bytes consumed before buf[0], for error messages
	srcErr   error
	b        *builder
	stack    []value
	marks    []int
	big      []byte // scratch for arguments longer than buf
	// flatDict's scratch: the items, the values memoized among them, and
	// the references in a frames list.
	flat, flatMemo [maxFlatItems]value
	flatRefs       []value
	// flatEvent's frames list made by flatItem without its items (its
	// compact list's index, or noList), and the frames they were: its
	// stack is made from them once the entry converts (see flatItem).
	pendingList   int64
	pendingFrames []int32
	// spans remembers the stacks of frames lists by their items' bytes
	// (see knownSpan); pendingSpan is pendingList's, remembered once its
	// stack is made.
	spans       spanCache
	pendingSpan []byte
	// heads: flatHead's key references (addr, size, stream, time_us, two
	// keys toEvent ignores, frames, then action), and
	// headsEpoch, memo.rewrites+1 when they were learnt (0: never).
	heads [headPairs]keyRef
	// actions: the actions' references and kinds, each in the slot of its
	// index's low byte (valid while heads are).
	actions    [16]actionRef
	headsEpoch uint64
	short      shortStr    // flatHead's string interned last (mask 0: none)
	tail       headTail    // flatHead's pairs after time_us, as last read (valid while heads are)
	forms      [5]pairForm // the forms of addr's, size's, stream's and time_us's pairs, and size's before (valid while heads are)
	headShort  int         // flatEvent's entries flatHead did not convert whole (tests)
	// flatBlocks' reader (and its scratch: a batch's blocks and their
	// frames).
	blockRd blockReader
	// slotKinds and slotInts: convertBlocks' memo slots, reused.
	slotKinds []vkind
	slotInts  []int64
	// ahead decodes the segments' block batches ahead of the machine, on
	// all cores (blockahead.go); aheadTried: it was started once.
	ahead      *blockAhead
	aheadTried bool
	// headCollected: collectHead ran (once per decode).
	headCollected bool
	slow          int // opcodes through loop's general path (see bounded)
	// par, when set, is the file itself: the machine reads it through ra
	// (read ahead, from an offset), and hands trace lists to regions.
	par *parSource
	ra  *readAhead
}

// readBuf is the read buffer size (larger than decode's bufio.Reader, which
// then passes reads straight through); readChunk bounds how much is allocated
// ahead of data actually read, so a hostile length field costs at most this
// much before EOF stops it.
const (
	readBuf   = 256 << 10
	readChunk = 1 << 20
)

func newUnpickler(r io.Reader, b *builder) *unpickler { return newUnpicklerSized(r, b, 0, nil) }

// newUnpicklerSized is newUnpickler for an input of size bytes (0 if
// unknown), whose buffer is readBufFor(size, readBuf) bytes: a small
// file's whole, and a byte more, as readBuf's would hold it. Its limits
// are readBuf's whatever the buffer (fill makes it readBuf long where
// more is needed: a length past the input's end, which then fails as
// it did). The buffer is made in off when it is not nil.
func newUnpicklerSized(r io.Reader, b *builder, size int64, off *grow.OffHeap) *unpickler {
	n := readBufFor(size, readBuf)
	return &unpickler{src: r, buf: makeOff[byte](off, n, n), b: b, short: shortStr{word: 1}}
}

// readBufFor is the length of a read buffer of most bytes for an input of
// size bytes (0 if unknown): most, or for a smaller input one byte more
// than it holds (minReadBuf at least), so that it reads the input whole
// in reads of the same lengths, and is never full of it, as the larger
// buffer would be.
func readBufFor(size int64, most int) int {
	if size <= 0 || size >= int64(most) {
		return most
	}
	return int(min(int64(most), max(size+1, minReadBuf)))
}

// minReadBuf is the shortest read buffer readBufFor makes.
const minReadBuf = 4 << 10

func (u *unpickler) push(v value) { u.stack = append(u.stack, v) }

func (u *unpickler) pop() (value, error) {
	n := len(u.stack)
	if n == 0 || (len(u.marks) > 0 && u.marks[len(u.marks)-1] == n) {
		return value{}, errors.New("stack underflow")
	}
	v := u.stack[n-1]
	u.stack = u.stack[:n-1]
	return v, nil
}

func (u *unpickler) top() (*value, error) {
	n := len(u.stack)
	if n == 0 || (len(u.marks) > 0 && u.marks[len(u.marks)-1] == n) {
		return nil, errors.New("stack underflow")
	}
	return &u.stack[n-1], nil
}

// popMark returns the items pushed since the last MARK (aliasing the stack)
// and removes them with the mark.
func (u *unpickler) popMark() ([]value, error) {
	if len(u.marks) == 0 {
		return nil, errors.New("no MARK on the stack")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := u.stack[m:]
	u.stack = u.stack[:m]
	return items, nil
}

func (u *unpickler) tuple(items []value) (value, error) {
	vals := make([]value, len(items))
	for i, it := range items {
		v, err := u.b.settle(it)
		if err != nil {
			return value{}, err
		}
		vals[i] = v
	}
	return u.b.newList(vTuple, vals), nil
}

// run executes opcodes until STOP and returns the settled top of the stack.
func (u *unpickler) run() (value, error) {
	v, err := u.loop()
	if err != nil {
		return value{}, fmt.Errorf("pickle offset %d: %w", u.offset(), err)
	}
	return v, nil
}

func (u *unpickler) loop() (value, error) {
	b := u.b
loop:
	for first := true; ; first = false {
		var op byte
		if u.pos+5 <= u.end {
			// Fast path for the hottest opcodes, whose argument is already buffered.
			op = u.buf[u.pos]
			switch op {
			case opBinGet:
				if v, ok := b.memo.get(uint64(u.buf[u.pos+1])); ok {
					u.pos += 2
					b.shared(v)
					u.stack = append(u.stack, v)
					continue
				}
			case opLongBinGet:
				if v, ok := b.memo.get(uint64(binary.LittleEndian.Uint32(u.buf[u.pos+1:]))); ok {
					u.pos += 5
					b.shared(v)
					u.stack = append(u.stack, v)
					continue
				}
			case opBinInt1:
				u.stack = append(u.stack, intValue(int64(u.buf[u.pos+1])))
				u.pos += 2
				continue
			case opMark:
				if c := u.buf[u.pos+1]; (c == opEmptyDict || c == opFrame) && u.flatBlocks() {
					if u.par != nil { // as APPENDS
						if _, err := u.tryRegion(); err != nil {
							return value{}, err
						}
					}
					continue
				}
				u.marks = append(u.marks, len(u.stack))
				u.pos++
				continue
			case opBinInt:
				u.stack = append(u.stack, intValue(int64(int32(binary.LittleEndian.Uint32(u.buf[u.pos+1:])))))
				u.pos += 5
				continue
			case opBinInt2:
				u.stack = append(u.stack, intValue(int64(binary.LittleEndian.Uint16(u.buf[u.pos+1:]))))
				u.pos += 3
				continue
			case opLong1:
				// Addresses and times: up to 8 bytes, read as one word (the
				// bytes past the argument are shifted out).
				if n := int(u.buf[u.pos+1]); n <= 8 && u.pos+10 <= u.end {
					u.stack = append(u.stack, intValue(long1(n, binary.LittleEndian.Uint64(u.buf[u.pos+2:]))))
					u.pos += 2 + n
					continue
				}
			case opShortBinUni:
				if n := int(u.buf[u.pos+1]); u.pos+2+n <= u.end {
					u.stack = append(u.stack, b.internBytes(u.buf[u.pos+2:u.pos+2+n]))
					u.pos += 2 + n
					continue
				}
			case opMemoize:
				if n := len(u.stack); n > 0 && (len(u.marks) == 0 || u.marks[len(u.marks)-1] != n) {
					u.memoPut(b.memo.n, u.stack[n-1])
					u.pos++
					continue
				}
			case opEmptyDict:
				if u.buf[u.pos+1] == opMemoize && u.buf[u.pos+2] == opMark && (u.flatEvent() || u.flatDict()) {
					// The dicts that follow it (a trace list's entries),
					// without the dispatch above: one it would leave to
					// the general path leaves this loop there (op is
					// still EMPTY_DICT), having been tried once.
					for {
						if u.pos+5 > u.end {
							continue loop
						}
						// EMPTY_DICT MEMOIZE MARK, as one word.
						if p := (*[4]byte)(u.buf[u.pos : u.pos+4]); binary.LittleEndian.Uint32(p[:])&0xffffff != opEmptyDict|opMemoize<<8|opMark<<16 {
							continue loop
						}
						if !u.flatEvent() && !u.flatDict() {
							break
						}
					}
				}
			}
			u.pos++
		} else {
			c, err := u.readByte()
			if err != nil {
				return value{}, err
			}
			op = c
		}
		if u.slow++; u.slow%boundEvery == 0 && u.bounded() != nil { // objects are made this way
			return value{}, u.bounded()
		}
		if first && op != opProto {
			return value{}, fmt.Errorf(notSnapshot+"no pickle PROTO header (first byte %#02x); snapshots are pickled with protocol 2 or later", op)
		}
		switch op {
		case opProto:
			p, err := u.readByte()
			if err != nil {
				return value{}, err
			}
			if p < 2 || p > 5 {
				return value{}, fmt.Errorf("pickle protocol %d is not supported (want 2 to 5)", p)
			}
		case opFrame:
			if _, err := u.read(8); err != nil {
				return value{}, err
			}
		case opStop:
			v, err := u.pop()
			if err != nil {
				return value{}, err
			}
			return b.settle(v)
		case opMark:
			u.marks = append(u.marks, len(u.stack))
		case opPop:
			if _, err := u.pop(); err != nil {
				return value{}, err
			}
		case opPopMark:
			if _, err := u.popMark(); err != nil {
				return value{}, err
			}
		case opDup:
			t, err := u.top()
			if err != nil {
				return value{}, err
			}
			b.shared(*t)
			u.push(*t)
		case opNone:
			u.push(value{})
		case opNewTrue:
			u.push(boolValue(true))
		case opNewFalse:
			u.push(boolValue(false))
		case opBinInt:
			p, err := u.read(4)
			if err != nil {
				return value{}, err
			}
			u.push(intValue(int64(int32(binary.LittleEndian.Uint32(p)))))
		case opBinInt1:
			c, err := u.readByte()
			if err != nil {
				return value{}, err
			}
			u.push(intValue(int64(c)))
		case opBinInt2:
			p, err := u.read(2)
			if err != nil {
				return value{}, err
			}
			u.push(intValue(int64(binary.LittleEndian.Uint16(p))))
		case opLong1, opLong4:
			var n uint64
			if op == opLong1 {
				c, err := u.readByte()
				if err != nil {
					return value{}, err
				}
				n = uint64(c)
			} else {
				p, err := u.read(4)
				if err != nil {
					return value{}, err
				}
				n = uint64(binary.LittleEndian.Uint32(p))
			}
			p, err := u.read(n)
			if err != nil {
				return value{}, err
			}
			u.push(decodeInt(p))
		case opInt, opLong:
			s, err := u.readLine()
			if err != nil {
				return value{}, err
			}
			u.push(parseTextInt(strings.TrimSuffix(s, "L")))
		case opBinFloat:
			p, err := u.read(8)
			if err != nil {
				return value{}, err
			}
			u.push(floatValue(math.Float64frombits(binary.BigEndian.Uint64(p))))
		case opFloat:
			s, err := u.readLine()
			if err != nil {
				return value{}, err
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return value{}, fmt.Errorf("FLOAT %q: %v", s, err)
			}
			u.push(floatValue(f))
		case opShortBinUni, opShortBinString, opShortBinBytes:
			c, err := u.readByte()
			if err != nil {
				return value{}, err
			}
			if err := u.pushString(op, uint64(c)); err != nil {
				return value{}, err
			}
		case opBinUnicode, opBinString, opBinBytes:
			p, err := u.read(4)
			if err != nil {
				return value{}, err
			}
			n := uint64(binary.LittleEndian.Uint32(p))
			if op == opBinString && int32(n) < 0 {
				return value{}, errors.New("BINSTRING with a negative length")
			}
			if err := u.pushString(op, n); err != nil {
				return value{}, err
			}
		case opBinUnicode8, opBinBytes8:
			p, err := u.read(8)
			if err != nil {
				return value{}, err
			}
			if err := u.pushString(op, binary.LittleEndian.Uint64(p)); err != nil {
				return value{}, err
			}
		case opEmptyDict:
			u.push(b.newDict())
		case opEmptyList:
			u.push(b.newList(vList, nil))
		case opEmptyTuple:
			u.push(b.newList(vTuple, nil))
		case opTuple1, opTuple2, opTuple3:
			n := int(op-opTuple1) + 1
			if len(u.stack) < n || (len(u.marks) > 0 && u.marks[len(u.marks)-1] > len(u.stack)-n) {
				return value{}, errors.New("stack underflow")
			}
			t, err := u.tuple(u.stack[len(u.stack)-n:])
			if err != nil {
				return value{}, err
			}
			u.stack = append(u.stack[:len(u.stack)-n], t)
		case opTuple:
			items, err := u.popMark()
			if err != nil {
				return value{}, err
			}
			t, err := u.tuple(items)
			if err != nil {
				return value{}, err
			}
			u.push(t)
		case opList:
			items, err := u.popMark()
			if err != nil {
				return value{}, err
			}
			l := b.newList(vList, nil)
			for _, it := range items {
				if err := b.appendItem(l, it); err != nil {
					return value{}, err
				}
			}
			u.push(l)
		case opDict:
			items, err := u.popMark()
			if err != nil {
				return value{}, err
			}
			if len(items)%2 != 0 {
				return value{}, errors.New("DICT with an odd number of items")
			}
			d := b.newDict()
			for i := 0; i < len(items); i += 2 {
				if err := b.setItem(d, items[i], items[i+1]); err != nil {
					return value{}, err
				}
			}
			u.push(d)
		case opAppend:
			v, err := u.pop()
			if err != nil {
				return value{}, err
			}
			l, err := u.top()
			if err != nil {
				return value{}, err
			}
			if err := b.appendItem(*l, v); err != nil {
				return value{}, err
			}
		case opAppends:
			items, err := u.popMark()
			if err != nil {
				return value{}, err
			}
			l, err := u.top()
			if err != nil {
				return value{}, err
			}
			b.reserveList(*l, items)
			for _, it := range items[b.appendEvents(*l, items):] {
				if err := b.appendItem(*l, it); err != nil {
					return value{}, err
				}
			}
			if u.par != nil {
				if _, err := u.tryRegion(); err != nil {
					return value{}, err
				}
			}
		case opSetItem:
			v, err := u.pop()
			if err != nil {
				return value{}, err
			}
			k, err := u.pop()
			if err != nil {
				return value{}, err
			}
			d, err := u.top()
			if err != nil {
				return value{}, err
			}
			if err := b.setItem(*d, k, v); err != nil {
				return value{}, err
			}
		case opSetItems:
			items, err := u.popMark()
			if err != nil {
				return value{}, err
			}
			if len(items)%2 != 0 {
				return value{}, errors.New("SETITEMS with an odd number of items")
			}
			d, err := u.top()
			if err != nil {
				return value{}, err
			}
			if d.k == vDict && u.consumedNext() {
				if conv, ok := b.settleItems(*d, items); ok {
					*d = conv
					continue
				}
			}
			b.reserveDict(*d, len(items)/2)
			for i := 0; i < len(items); i += 2 {
				if err := b.setItem(*d, items[i], items[i+1]); err != nil {
					return value{}, err
				}
			}
		case opMemoize:
			t, err := u.top()
			if err != nil {
				return value{}, err
			}
			u.memoPut(b.memo.n, *t)
		case opBinPut, opLongBinPut, opPut:
			idx, err := u.memoIndex(op, opBinPut, opLongBinPut)
			if err != nil {
				return value{}, err
			}
			t, err := u.top()
			if err != nil {
				return value{}, err
			}
			u.memoPut(idx, *t)
		case opBinGet, opLongBinGet, opGet:
			idx, err := u.memoIndex(op, opBinGet, opLongBinGet)
			if err != nil {
				return value{}, err
			}
			v, ok := b.memo.get(idx)
			if !ok {
				return value{}, fmt.Errorf("memo index %d was never stored", idx)
			}
			b.shared(v)
			u.push(v)
		case opGlobal:
			mod, _ := u.readLine()
			name, _ := u.readLine()
			return value{}, fmt.Errorf(notSnapshot+"pickle uses class GLOBAL %s.%s (snapshots hold only builtin types)", mod, name)
		case opStackGlobal:
			return value{}, errors.New(notSnapshot + "pickle uses class loading (STACK_GLOBAL); snapshots hold only builtin types")
		case opReduce, opBuild, opInst, opObj, opNewObj, opNewObjEx, opExt1, opExt2, opExt4,
			opPersID, opBinPersID:
			return value{}, fmt.Errorf(notSnapshot+"pickle builds objects (opcode %s); snapshots hold only builtin types", opName(op))
		default:
			return value{}, fmt.Errorf("unsupported pickle opcode %s", opName(op))
		}
	}
}

func (u *unpickler) pushString(op byte, n uint64) error {
	p, err := u.read(n)
	if err != nil {
		return err
	}
	if op == opShortBinBytes || op == opBinBytes || op == opBinBytes8 {
		u.push(value{k: vBytes})
		return nil
	}
	u.push(u.b.internBytes(p))
	return nil
}

func (u *unpickler) memoIndex(op, one, four byte) (uint64, error) {
	switch op {
	case one:
		c, err := u.readByte()
		return uint64(c), err
	case four:
		p, err := u.read(4)
		if err != nil {
			return 0, err
		}
		return uint64(binary.LittleEndian.Uint32(p)), nil
	}
	s, err := u.readLine()
	if err != nil {
		return 0, err
	}
	idx, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("memo index %q: %v", s, err)
	}
	return idx, nil
}

func (u *unpickler) memoPut(idx uint64, v value) {
	if v.k == vDict {
		u.b.dictMemo(v, idx)
	}
	u.b.memo.put(idx, v)
}
