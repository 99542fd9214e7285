package torchsnap

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting; snapshots nest five levels deep.
const maxJSONDepth = 256

// decodeJSON reads MemoryViz's JSON form of a snapshot (the same schema as the
// pickle) into the builder's value model, so both inputs share one converter.
// It accepts what encoding/json accepts, and decodes strings as it does
// (invalid UTF-8 and unpaired surrogates become U+FFFD), but scans the bytes
// itself and hands each string to the builder straight from its buffer:
// encoding/json's token API allocates for every token, several times the
// cost of the conversion behind it.
func decodeJSON(r io.Reader, b *builder) (value, error) {
	j := &jsonReader{src: r, buf: make([]byte, 64<<10), b: b}
	v, err := j.value(0)
	if err != nil {
		return value{}, fmt.Errorf("json: %w", err)
	}
	if c, err := j.skipSpace(); err != io.ErrUnexpectedEOF || c != 0 {
		return value{}, errors.New("json: data after the top-level value")
	}
	return b.settle(v)
}

// jsonReader scans JSON through a buffer of its own, as the unpickler does.
type jsonReader struct {
	src      io.Reader
	buf      []byte
	pos, end int
	srcErr   error // the source's error, once its bytes are all buffered
	b        *builder
	tmp      []byte // a string or number that spans refills, or has escapes
}

// fill reads more of the source into the buffer, keeping buf[pos:end]. It
// returns io.ErrUnexpectedEOF at the end of the input.
func (j *jsonReader) fill() error {
	if j.srcErr != nil {
		if j.srcErr == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return j.srcErr
	}
	n := copy(j.buf, j.buf[j.pos:j.end])
	j.pos, j.end = 0, n
	for j.end < len(j.buf) {
		m, err := j.src.Read(j.buf[j.end:])
		j.end += m
		if err != nil {
			j.srcErr = err
			break
		}
		if m > 0 {
			break
		}
	}
	if j.pos == j.end {
		return j.fill()
	}
	return nil
}

// skipSpace skips whitespace and returns the next byte, not consumed.
func (j *jsonReader) skipSpace() (byte, error) {
	for {
		for j.pos < j.end {
			c := j.buf[j.pos]
			if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
				return c, nil
			}
			j.pos++
		}
		if err := j.fill(); err != nil {
			return 0, err
		}
	}
}

// value reads one value and returns it in the builder's model.
func (j *jsonReader) value(depth int) (value, error) {
	if depth > maxJSONDepth {
		return value{}, errors.New("nested too deeply")
	}
	c, err := j.skipSpace()
	if err != nil {
		return value{}, err
	}
	switch {
	case c == '{':
		j.pos++
		return j.object(depth)
	case c == '[':
		j.pos++
		return j.array(depth)
	case c == '"':
		j.pos++
		p, err := j.str()
		if err != nil {
			return value{}, err
		}
		return j.b.internBytes(p), nil
	case c == '-' || c >= '0' && c <= '9':
		return j.number()
	case c == 't':
		return boolValue(true), j.literal("true")
	case c == 'f':
		return boolValue(false), j.literal("false")
	case c == 'n':
		return value{}, j.literal("null")
	}
	return value{}, syntaxErr(c, "looking for beginning of value")
}

func (j *jsonReader) object(depth int) (value, error) {
	d := j.b.newDict()
	c, err := j.skipSpace()
	if err != nil {
		return value{}, err
	}
	if c == '}' {
		j.pos++
		return d, nil
	}
	for {
		if c != '"' {
			return value{}, syntaxErr(c, "looking for beginning of object key string")
		}
		j.pos++
		p, err := j.str()
		if err != nil {
			return value{}, err
		}
		// A key is interned after its value, as a decoder that reads the
		// value first would: string ids follow the order strings first
		// appear in. A key seen before has its id already.
		id, known := j.b.strIdx[string(p)]
		var key string
		if !known {
			key = string(p)
		}
		if c, err = j.skipSpace(); err != nil {
			return value{}, err
		}
		if c != ':' {
			return value{}, syntaxErr(c, "after object key")
		}
		j.pos++
		v, err := j.value(depth + 1)
		if err != nil {
			return value{}, err
		}
		k := value{vStr, int64(id)}
		if !known {
			k = j.b.internString(key)
		}
		if err := j.b.setItem(d, k, v); err != nil {
			return value{}, err
		}
		if c, err = j.skipSpace(); err != nil {
			return value{}, err
		}
		j.pos++
		switch c {
		case '}':
			return d, nil
		case ',':
			if c, err = j.skipSpace(); err != nil {
				return value{}, err
			}
		default:
			return value{}, syntaxErr(c, "after object key:value pair")
		}
	}
}

func (j *jsonReader) array(depth int) (value, error) {
	l := j.b.newList(vList, nil)
	c, err := j.skipSpace()
	if err != nil {
		return value{}, err
	}
	if c == ']' {
		j.pos++
		return l, nil
	}
	for {
		v, err := j.value(depth + 1)
		if err != nil {
			return value{}, err
		}
		if err := j.b.appendItem(l, v); err != nil {
			return value{}, err
		}
		if c, err = j.skipSpace(); err != nil {
			return value{}, err
		}
		j.pos++
		switch c {
		case ']':
			return l, nil
		case ',':
		default:
			return value{}, syntaxErr(c, "after array element")
		}
	}
}

// str reads a string's contents after its opening quote. The bytes it
// returns are valid until the next read.
func (j *jsonReader) str() ([]byte, error) {
	// Most strings are plain ASCII within the buffer: returned in place.
	for i := j.pos; i < j.end; i++ {
		c := j.buf[i]
		if c == '"' {
			p := j.buf[j.pos:i]
			j.pos = i + 1
			return p, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	j.tmp = j.tmp[:0]
	for {
		if j.pos == j.end {
			if err := j.fill(); err != nil {
				return nil, err
			}
		}
		c := j.buf[j.pos]
		switch {
		case c == '"':
			j.pos++
			return j.tmp, nil
		case c < 0x20:
			return nil, syntaxErr(c, "in string literal")
		case c == '\\':
			if err := j.escape(); err != nil {
				return nil, err
			}
		case c < utf8.RuneSelf:
			j.tmp = append(j.tmp, c)
			j.pos++
		default:
			if j.end-j.pos < utf8.UTFMax && !utf8.FullRune(j.buf[j.pos:j.end]) {
				if err := j.fill(); err != nil && err != io.ErrUnexpectedEOF {
					return nil, err
				}
			}
			r, n := utf8.DecodeRune(j.buf[j.pos:j.end])
			j.tmp = utf8.AppendRune(j.tmp, r) // U+FFFD for an invalid byte
			j.pos += n
		}
	}
}

// ensure makes n bytes available at pos, or as many as the input has left.
func (j *jsonReader) ensure(n int) {
	for j.end-j.pos < n {
		if j.fill() != nil {
			return
		}
	}
}

// escape decodes the escape sequence at pos into tmp.
func (j *jsonReader) escape() error {
	j.ensure(2)
	if j.end-j.pos < 2 {
		return io.ErrUnexpectedEOF
	}
	c := j.buf[j.pos+1]
	j.pos += 2
	switch c {
	case '"', '\\', '/':
		j.tmp = append(j.tmp, c)
	case 'b':
		j.tmp = append(j.tmp, '\b')
	case 'f':
		j.tmp = append(j.tmp, '\f')
	case 'n':
		j.tmp = append(j.tmp, '\n')
	case 'r':
		j.tmp = append(j.tmp, '\r')
	case 't':
		j.tmp = append(j.tmp, '\t')
	case 'u':
		r, err := j.hex4()
		if err != nil {
			return err
		}
		if utf16.IsSurrogate(r) {
			// The low half must follow as another \u escape; otherwise
			// the high half alone becomes U+FFFD, and what follows is
			// read on its own.
			j.ensure(6)
			r2 := rune(-1)
			if j.end-j.pos >= 6 && j.buf[j.pos] == '\\' && j.buf[j.pos+1] == 'u' {
				r2 = hexRune(j.buf[j.pos+2 : j.pos+6])
			}
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				j.pos += 6
				r = dec
			} else {
				r = utf8.RuneError
			}
		}
		j.tmp = utf8.AppendRune(j.tmp, r)
	default:
		return syntaxErr(c, "in string escape code")
	}
	return nil
}

// hex4 reads the four hexadecimal digits of a \u escape.
func (j *jsonReader) hex4() (rune, error) {
	j.ensure(4)
	for i := range 4 {
		if j.pos+i == j.end {
			return 0, io.ErrUnexpectedEOF
		}
		if c := j.buf[j.pos+i]; hexDigit(c) < 0 {
			return 0, syntaxErr(c, `in \u hexadecimal character escape`)
		}
	}
	r := hexRune(j.buf[j.pos : j.pos+4])
	j.pos += 4
	return r, nil
}

func hexDigit(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// hexRune decodes four hexadecimal digits, or returns -1.
func hexRune(p []byte) rune {
	var r rune
	for _, c := range p {
		d := hexDigit(c)
		if d < 0 {
			return -1
		}
		r = r<<4 | d
	}
	return r
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (j *jsonReader) number() (value, error) {
	j.tmp = j.tmp[:0]
	peek := func() (byte, bool) {
		if j.pos == j.end && j.fill() != nil {
			return 0, false
		}
		return j.buf[j.pos], true
	}
	take := func() {
		j.tmp = append(j.tmp, j.buf[j.pos])
		j.pos++
	}
	digits := func(context string) error { // one or more
		c, ok := peek()
		if !ok {
			return io.ErrUnexpectedEOF
		}
		if c < '0' || c > '9' {
			return syntaxErr(c, context)
		}
		for ok && c >= '0' && c <= '9' {
			take()
			c, ok = peek()
		}
		return nil
	}
	if c, _ := peek(); c == '-' {
		take()
	}
	c, ok := peek()
	switch {
	case !ok:
		return value{}, io.ErrUnexpectedEOF
	case c == '0':
		take()
	default:
		if err := digits("in numeric literal"); err != nil {
			return value{}, err
		}
	}
	if c, ok := peek(); ok && c == '.' {
		take()
		if err := digits("after decimal point in numeric literal"); err != nil {
			return value{}, err
		}
	}
	if c, ok := peek(); ok && (c == 'e' || c == 'E') {
		take()
		if c, ok := peek(); ok && (c == '+' || c == '-') {
			take()
		}
		if err := digits("in exponent of numeric literal"); err != nil {
			return value{}, err
		}
	}
	return jsonNumber(j.tmp), nil
}

// literal reads true, false or null.
func (j *jsonReader) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if j.pos == j.end {
			if err := j.fill(); err != nil {
				return err
			}
		}
		if c := j.buf[j.pos]; c != word[i] {
			return syntaxErr(c, fmt.Sprintf("in literal %s (expecting %s)", word, quoteChar(word[i])))
		}
		j.pos++
	}
	return nil
}

// jsonNumber converts a number's text as encoding/json's Number would be.
func jsonNumber(p []byte) value {
	if n, ok := smallInt(p); ok {
		return intValue(n)
	}
	s := string(p)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return intValue(n)
	}
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return value{vUint, int64(n)}
		}
		return value{k: vBig}
	}
	f, _ := strconv.ParseFloat(s, 64)
	return floatValue(f)
}

// smallInt parses an integer of up to 18 digits, which cannot overflow.
func smallInt(p []byte) (int64, bool) {
	neg := len(p) > 0 && p[0] == '-'
	if neg {
		p = p[1:]
	}
	if len(p) == 0 || len(p) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// syntaxErr describes an unexpected byte as encoding/json does.
func syntaxErr(c byte, context string) error {
	return errors.New("invalid character " + quoteChar(c) + " " + context)
}

func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(c))
	return "'" + s[1:len(s)-1] + "'"
}
