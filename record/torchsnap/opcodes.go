package torchsnap

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
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
