package torchsnap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// fill makes at least need bytes (≤ readBuf) available at u.pos, first
// making the buffer readBuf long if need is more than it holds
// (newUnpicklerSized).
func (u *unpickler) fill(need int) error {
	if need > len(u.buf) {
		buf := make([]byte, readBuf)
		copy(buf, u.buf[:u.end])
		u.buf = buf
	}
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
	if n <= readBuf {
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
			if u.end-u.pos == readBuf {
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
