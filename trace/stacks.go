package trace

import (
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// stackTable is a Writer's stacks, stored as the format (v2) stores them:
// each distinct frame once, as text, in the frame table (the dictionary of
// the frame column), and each distinct stack as the list of its frames'
// ids (the dictionary of the stack column). A trace's size then grows with
// the distinct frames' text plus four bytes a frame of each distinct
// stack, instead of with every distinct stack's whole text.
type stackTable struct {
	frameIDs  map[string]int32
	frameText []string
	stackIDs  map[string]StackID // key: the stack's frame ids, 4 bytes each
	offs      []int32            // stack i's frames are vals[offs[i]:offs[i+1]]
	vals      []int32
	// first is each stack's innermost frame, the frame column's value for
	// an event of that stack: the empty frame (text "") for an empty stack.
	first   []int32
	emptyID int32 // the empty frame's id; -1 until an empty stack is added
	key     []byte
	text    []byte // a frame's text, as add formats it

	mem                  memory.Allocator
	frameDict, stackDict arrow.Array // as last built; nil when stale
}

func (t *stackTable) init(mem memory.Allocator) {
	t.mem = mem
	t.frameIDs = make(map[string]int32)
	t.stackIDs = make(map[string]StackID)
	t.offs = []int32{0}
	t.emptyID = -1
}

// len is the number of stacks added.
func (t *stackTable) len() int { return len(t.first) }

func (t *stackTable) frameID(text string) int32 {
	if id, ok := t.frameIDs[text]; ok {
		return id
	}
	id := int32(len(t.frameText))
	t.frameIDs[text] = id
	t.frameText = append(t.frameText, text)
	return id
}

// frameIDOf is frameID of text held in bytes: a string is made only for a
// new frame.
func (t *stackTable) frameIDOf(text []byte) int32 {
	if id, ok := t.frameIDs[string(text)]; ok {
		return id
	}
	return t.frameID(string(text))
}

// add interns s (see Writer.AddStack).
func (t *stackTable) add(s Stack) StackID {
	key := t.key[:0]
	n0 := len(t.vals)
	for _, f := range s {
		t.text = appendFrame(t.text[:0], f)
		id := t.frameIDOf(t.text)
		t.vals = append(t.vals, id)
		key = append(key, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
	}
	t.key = key
	if id, ok := t.stackIDs[string(key)]; ok {
		t.vals = t.vals[:n0]
		return id
	}
	id := StackID(len(t.first))
	t.stackIDs[string(key)] = id
	t.offs = append(t.offs, int32(len(t.vals)))
	if len(s) == 0 {
		if t.emptyID < 0 {
			t.emptyID = t.frameID("")
		}
		t.first = append(t.first, t.emptyID)
	} else {
		t.first = append(t.first, t.vals[n0])
	}
	t.release()
	return id
}

// dictionaries returns the frame and stack dictionaries of every frame and
// stack added so far. They only grow, keeping their order, so the IPC
// writer emits just the new entries of each batch as delta dictionaries.
// The stack dictionary borrows the table's slices, whose values never
// change once added.
func (t *stackTable) dictionaries() (frames, stacks arrow.Array) {
	if t.frameDict == nil {
		b := array.NewStringBuilder(t.mem)
		b.AppendValues(t.frameText, nil)
		t.frameDict = b.NewArray()
		b.Release()
		n := len(t.first)
		vals := fixed(arrow.PrimitiveTypes.Int32, int(t.offs[n]), arrow.Int32Traits.CastToBytes(t.vals[:t.offs[n]]), nil, 0)
		data := array.NewData(stackValueType, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(t.offs[:n+1]))},
			[]arrow.ArrayData{vals.Data()}, 0, 0)
		vals.Release()
		t.stackDict = array.MakeFromData(data)
		data.Release()
	}
	return t.frameDict, t.stackDict
}

func (t *stackTable) release() {
	if t.frameDict != nil {
		t.frameDict.Release()
		t.stackDict.Release()
		t.frameDict, t.stackDict = nil, nil
	}
}

// FormatFrame renders a frame as the trace's frame table stores it:
// "name<TAB>file<TAB>line", line "?" when unknown. Tabs and newlines inside
// names and file names become spaces, so the encoding is unambiguous.
func FormatFrame(f Frame) string {
	var b strings.Builder
	writeFrame(&b, f)
	return b.String()
}

// appendFrame appends f to b as FormatFrame renders it.
func appendFrame(b []byte, f Frame) []byte {
	b = appendClean(b, f.Name)
	b = append(b, '\t')
	b = appendClean(b, f.File)
	b = append(b, '\t')
	if f.Line < 0 {
		return append(b, '?')
	}
	return strconv.AppendInt(b, int64(f.Line), 10)
}

// appendClean appends s to b as clean returns it.
func appendClean(b []byte, s string) []byte {
	if strings.IndexByte(s, '\t') < 0 && strings.IndexByte(s, '\n') < 0 {
		return append(b, s...)
	}
	return append(b, clean(s)...)
}

func writeFrame(b *strings.Builder, f Frame) {
	b.WriteString(clean(f.Name))
	b.WriteByte('\t')
	b.WriteString(clean(f.File))
	b.WriteByte('\t')
	if f.Line < 0 {
		b.WriteByte('?')
	} else {
		b.WriteString(strconv.Itoa(int(f.Line)))
	}
}

// parseFrame is the inverse of FormatFrame. A malformed line keeps its text
// as the frame name, so a foreign file never fails to load over a stack.
func parseFrame(ln string) Frame {
	parts := strings.Split(ln, "\t")
	if len(parts) != 3 {
		return Frame{Name: ln}
	}
	line := UnknownLine
	if n, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
		line = LineOf(n)
	}
	return Frame{Name: parts[0], File: parts[1], Line: line}
}
