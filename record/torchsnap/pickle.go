package torchsnap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/tracer-dev/tracer/trace"
)

// Pickle opcodes (CPython Lib/pickle.py). Only the subset that dumps of plain
// dicts, lists, tuples, strings, ints, floats and bools use is executed; the
// class-loading ones are refused so that a hostile file cannot make us
// interpret anything beyond data.
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opFloat          = 'F'
	opInt            = 'I'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opLong           = 'L'
	opBinInt2        = 'M'
	opNone           = 'N'
	opPersID         = 'P'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opString         = 'S'
	opBinString      = 'T'
	opShortBinString = 'U'
	opUnicode        = 'V'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opGet            = 'g'
	opBinGet         = 'h'
	opInst           = 'i'
	opLongBinGet     = 'j'
	opList           = 'l'
	opEmptyList      = ']'
	opObj            = 'o'
	opPut            = 'p'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetItems       = 'u'
	opBinFloat       = 'G'

	opProto          = 0x80
	opNewObj         = 0x81
	opExt1           = 0x82
	opExt2           = 0x83
	opExt4           = 0x84
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opLong4          = 0x8b
	opBinBytes       = 'B'
	opShortBinBytes  = 'C'
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinBytes8      = 0x8e
	opEmptySet       = 0x8f
	opAddItems       = 0x90
	opFrozenSet      = 0x91
	opNewObjEx       = 0x92
	opStackGlobal    = 0x93
	opMemoize        = 0x94
	opFrame          = 0x95
	opByteArray8     = 0x96
	opNextBuffer     = 0x97
	opReadonlyBuffer = 0x98
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
	slow        int // opcodes through loop's general path (see bounded)
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

func newUnpickler(r io.Reader, b *builder) *unpickler {
	return &unpickler{src: r, buf: make([]byte, readBuf), b: b}
}

// fill makes at least need bytes (≤ len(u.buf)) available at u.pos.
func (u *unpickler) fill(need int) error {
	if u.pos > 0 {
		n := copy(u.buf, u.buf[u.pos:u.end])
		u.off += int64(u.pos)
		u.pos, u.end = 0, n
	}
	for u.end < need {
		if u.srcErr != nil {
			return u.eof(u.srcErr)
		}
		n, err := u.src.Read(u.buf[u.end:])
		u.end += n
		if err != nil {
			u.srcErr = err
		}
	}
	return u.bounded()
}

// bounded returns an error when the machine holds more generic objects
// than the bytes read so far can account for: a snapshot holds few at once,
// its trace entries and frames being converted as they come, and what it
// holds many of (the entries of a trace list, a segment's blocks) takes
// dozens of bytes each; a frames list's references, two bytes each, are
// dropped once its stack is made. Without the bound, a flood of one-byte opcodes
// that push (DUP, EMPTY_DICT, NONE, ...) would take 16 to 250 bytes of
// memory for each byte of the file. It is checked as each buffer of input
// is read and every boundEvery opcodes of the general path, so that
// between checks the objects grow by little.
func (u *unpickler) bounded() error {
	read := u.offset()
	b := u.b
	for _, c := range [...]struct {
		what string
		n    int64
		per  int64 // the fewest bytes of pickle each takes in a snapshot
	}{
		{"values on the pickle stack", int64(len(u.stack) + len(u.marks)), 8},
		{"dicts", int64(len(b.dicts)), 8},
		{"lists", b.lists.n, 8},
		{"list items", b.listItems, 8},
	} {
		if c.n > read/c.per+boundSlack {
			return fmt.Errorf("%d %s after %d bytes: more than a snapshot needs (one per %d bytes); refused, to bound the decoder's memory", c.n, c.what, read, c.per)
		}
	}
	return nil
}

// boundSlack is what bounded allows beyond one object per so many bytes;
// boundEvery how many opcodes of loop's general path go between checks.
const (
	boundSlack = 16 << 10
	boundEvery = 4 << 10
)

// openAt makes the machine read the file from offset x on.
func (u *unpickler) openAt(x int64) {
	u.closeSrc()
	sr := io.NewSectionReader(u.par.ra, x, u.par.size-x)
	u.src = sr
	if _, mem := u.par.ra.(*bytes.Reader); !mem && u.par.size-x >= readAheadMin {
		u.ra = newReadAhead(sr)
		u.src = u.ra
	}
	u.pos, u.end, u.off, u.srcErr = 0, 0, x, nil
}

// closeSrc stops the read-ahead of openAt, if any.
func (u *unpickler) closeSrc() {
	if u.ra != nil {
		u.ra.close()
		u.ra = nil
	}
}

func (u *unpickler) offset() int64 { return u.off + int64(u.pos) }

func (u *unpickler) readByte() (byte, error) {
	if u.pos < u.end {
		c := u.buf[u.pos]
		u.pos++
		return c, nil
	}
	if err := u.fill(1); err != nil {
		return 0, err
	}
	c := u.buf[u.pos]
	u.pos++
	return c, nil
}

func (u *unpickler) eof(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return errors.New("truncated pickle: unexpected end of file (no STOP opcode)")
	}
	return err
}

// read returns the next n bytes; the slice is valid until the next read.
func (u *unpickler) read(n uint64) ([]byte, error) {
	if n <= uint64(u.end-u.pos) {
		p := u.buf[u.pos : u.pos+int(n)]
		u.pos += int(n)
		return p, nil
	}
	if n <= uint64(len(u.buf)) {
		if err := u.fill(int(n)); err != nil {
			return nil, err
		}
		p := u.buf[u.pos : u.pos+int(n)]
		u.pos += int(n)
		return p, nil
	}
	// Longer than the buffer: take what is buffered, then read in chunks.
	u.big = append(u.big[:0], u.buf[u.pos:u.end]...)
	n -= uint64(u.end - u.pos)
	u.pos = u.end
	for n > 0 {
		if u.srcErr != nil {
			return nil, u.eof(u.srcErr)
		}
		c := min(n, readChunk)
		start := len(u.big)
		u.big = append(u.big, make([]byte, c)...)
		got, err := io.ReadFull(u.src, u.big[start:])
		u.off += int64(got)
		if err != nil {
			return nil, u.eof(err)
		}
		n -= c
	}
	return u.big, nil
}

func (u *unpickler) readLine() (string, error) {
	for i := u.pos; ; i++ {
		if i == u.end {
			if u.end-u.pos == len(u.buf) {
				return "", errors.New("text opcode argument too long")
			}
			have := u.end - u.pos
			if err := u.fill(have + 1); err != nil {
				return "", err
			}
			i = u.pos + have
		}
		if u.buf[i] == '\n' {
			line := string(u.buf[u.pos:i])
			u.pos = i + 1
			return line, nil
		}
	}
}

// consumedNext reports whether the next opcode (past a FRAME header) starts
// the next dict or appends to a list: then the dict just filled by SETITEMS
// is complete, and will be settled by the list that takes it like the dicts
// beside it, so it can be converted now (builder.settleItems). This is how
// CPython writes a list of dicts.
func (u *unpickler) consumedNext() bool {
	if u.end-u.pos < 16 && u.srcErr == nil {
		u.fill(min(16, len(u.buf))) // an error stays in srcErr for the next read
	}
	p := u.pos
	if p < u.end && u.buf[p] == opFrame {
		p += 9
	}
	if p >= u.end {
		return false
	}
	switch u.buf[p] {
	case opEmptyDict, opAppends, opAppend:
		return true
	}
	return false
}

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

// decodeInt reads a little-endian two's complement integer (LONG1/LONG4).
func decodeInt(p []byte) value {
	n := len(p)
	switch {
	case n == 0:
		return intValue(0)
	case n <= 8:
		var x uint64
		for i := n - 1; i >= 0; i-- {
			x = x<<8 | uint64(p[i])
		}
		if shift := uint(64 - 8*n); shift > 0 {
			x = uint64(int64(x<<shift) >> shift) // sign-extend
		}
		return intValue(int64(x))
	}
	// Wider encodings: an unsigned 64-bit value with trailing zero bytes still fits.
	for _, c := range p[8:] {
		if c != 0 {
			return value{k: vBig}
		}
	}
	x := binary.LittleEndian.Uint64(p)
	if x > math.MaxInt64 {
		return value{vUint, int64(x)}
	}
	return intValue(int64(x))
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
				if u.buf[u.pos+1] == opMemoize && u.buf[u.pos+2] == opMark && u.flatDict() {
					continue
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
			for _, it := range items {
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
// first few of a file) goes through flatEvent, which converts it as it
// reads it.
func (u *unpickler) flatDict() bool {
	if u.flatEvent() {
		return true
	}
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
	case opBinInt1:
		v = intValue(int64(p[1]))
		i += 2
	case opBinInt2:
		v = intValue(int64(binary.LittleEndian.Uint16(p[1:3])))
		i += 3
	case opBinInt:
		v = intValue(int64(int32(binary.LittleEndian.Uint32(p[1:5]))))
		i += 5
	case opLong1:
		c := int(p[1])
		if c > 8 {
			return value{}, 0, false
		}
		v = intValue(long1(c, binary.LittleEndian.Uint64(p[2:10])))
		i += 2 + c
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
	// The memo's first chunk, where the keys are: nothing below stores into
	// the memo, so it stays valid. Its kinds and ints are as long: cut to
	// one length, a lookup checks its index once.
	k0, v0 := b.memo.k0, b.memo.v0
	n0 := min(len(k0), len(v0))
	k0, v0 = k0[:n0], v0[:n0]
	// The first key is "action", as convert expects of a trace entry.
	if len(buf) < 10 {
		return false
	}
	if a, n := memoRef((*[10]byte)(buf[:10])); n == 0 || a >= uint64(n0) || k0[a] != vStr || v0[a] != kAction {
		return false
	}
	e := flatEntry{ev: cev{Stack: trace.NoStack}, frames: value{k: vMark}}
	u.pendingList, u.pendingSpan = noList, nil
	i, hasAddr := 0, false
	for pairs := 0; ; pairs++ {
		// The key, a reference to a string of the memo's first chunk, and
		// q, the opcode and argument of the value after it. (Compared
		// unsigned, as the slice's bounds check is, which it spares.)
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
		if idx >= uint64(n0) || k0[idx] != vStr {
			return false
		}
		key := int64(v0[idx])
		// The value, in the opcodes PyTorch writes for its key, converted
		// here as flatValue would; any other, and the values that need
		// calls (frames, strings), by flatValue. Dispatching on the key
		// alone, rather than on the value's opcode and then the key, and
		// keeping those calls' state out of this loop, decodes a real
		// snapshot in 22% fewer instructions.
		switch key {
		case kAction:
			if a, n := memoRef(q); n != 0 && a < uint64(n0) && k0[a] == vStr {
				id := int64(v0[a])
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
			if a, n := memoRef(q); n != 0 && a < uint64(n0) && k0[a] != vDict && k0[a] != vWide {
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
			b.lists.frames[-1-e.frames.i] = int32(e.ev.Stack)
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
	b.memo.putNext(conv, u.flatMemo[:e.nm])
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
			st, ok := u.spans.get(span, u.b.memo.rewrites)
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
	epoch uint64 // memo.rewrites when the slots were filled
}

type spanSlot struct {
	key []byte
	st  trace.StackID
}

const (
	spanBits  = 10
	spanSlots = 1 << spanBits
)

func spanHash(span []byte) uint64 {
	h := uint64(len(span)) * 0x9E3779B97F4A7C15
	for len(span) >= 8 {
		h = (h ^ binary.LittleEndian.Uint64(span)) * 0x9E3779B97F4A7C15
		span = span[8:]
	}
	for _, c := range span {
		h = (h ^ uint64(c)) * 0x9E3779B97F4A7C15
	}
	return h >> (64 - spanBits)
}

func (c *spanCache) get(span []byte, epoch uint64) (trace.StackID, bool) {
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
	sl := &c.slots[spanHash(span)]
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

// allFrames reports whether every value in vs is a frame.
func allFrames(vs []value) bool {
	for _, v := range vs {
		if v.k != vFrame {
			return false
		}
	}
	return true
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

func parseTextInt(s string) value {
	switch s {
	case "00":
		return boolValue(false)
	case "01":
		return boolValue(true)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return intValue(n)
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return value{vUint, int64(n)}
	}
	return value{k: vBig}
}

func opName(op byte) string {
	if op >= 0x20 && op < 0x7f {
		return fmt.Sprintf("%q", rune(op))
	}
	return fmt.Sprintf("%#02x", op)
}

// long1 decodes a LONG1 argument of c bytes (c <= 8, little-endian two's
// complement) from w, the word read at its first byte: the bytes past the
// argument are shifted out, and c = 0 gives 0.
func long1(c int, w uint64) int64 {
	if c == 0 {
		return 0
	}
	shift := uint(64-8*c) & 63 // the same for c in [1, 8]; tells the compiler it is under 64
	return int64(w<<shift) >> shift
}

// memoRef decodes the memo reference (BINGET, LONG_BINGET) at q: the index
// and the reference's length, or n = 0 for another opcode.
func memoRef(q *[10]byte) (idx uint64, n int) {
	switch q[0] {
	case opBinGet:
		return uint64(q[1]), 2
	case opLongBinGet:
		return uint64(binary.LittleEndian.Uint32(q[1:5])), 5
	}
	return 0, 0
}

// binIntAt decodes the integer BININT1, BININT2 or BININT at q: its value
// and length, or n = 0 for another opcode.
func binIntAt(q *[10]byte) (x int64, n int) {
	switch q[0] {
	case opBinInt1:
		return int64(q[1]), 2
	case opBinInt2:
		return int64(binary.LittleEndian.Uint16(q[1:3])), 3
	case opBinInt:
		return int64(int32(binary.LittleEndian.Uint32(q[1:5]))), 5
	}
	return 0, 0
}

// long1At decodes the integer LONG1 of up to 8 bytes at q: its value and
// length, or n = 0 for anything else.
func long1At(q *[10]byte) (x int64, n int) {
	if c := int(q[1]); q[0] == opLong1 && c <= 8 {
		return long1(c, binary.LittleEndian.Uint64(q[2:10])), 2 + c
	}
	return 0, 0
}
