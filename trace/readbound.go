package trace

import (
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/tracer-dev/tracer/internal/grow"
)

// tailReader remembers the last 8 bytes read, to tell a properly ended stream
// (end-of-stream marker 0xFFFFFFFF 0x00000000) from one cut short.
type tailReader struct {
	r       io.Reader
	metaLen int64 // the length just read: the next read of that size is metadata
	n       int64 // bytes read
	size    int64 // total size when known, else -1
	tail    [8]byte
	head    [4]byte // the first bytes of the input (fewer when it is shorter)
	nhead   int
}

// arrowStart reports whether the input began as an Arrow IPC stream does,
// with the continuation marker 0xFFFFFFFF, as far as it was read.
func (t *tailReader) arrowStart() bool {
	for _, b := range t.head[:t.nhead] {
		if b != 0xff {
			return false
		}
	}
	return true
}

func (t *tailReader) Read(p []byte) (int, error) {
	if t.metaLen > 0 && int64(len(p)) == t.metaLen {
		// The message metadata: read it whole and verify it before arrow
		// decodes it (see verify.go).
		t.metaLen = 0
		n, err := io.ReadFull(t.r, p)
		t.count(p[:n])
		if err != nil {
			return n, err
		}
		if err := verifyMessage(p); err != nil {
			return 0, err
		}
		return n, nil
	}
	n, err := t.r.Read(p)
	if t.nhead < len(t.head) {
		t.nhead += copy(t.head[t.nhead:], p[:n])
	}
	// arrow's message reader reads a 4-byte continuation marker, then a 4-byte
	// metadata length (legacy streams have the length alone) that it
	// allocates unchecked: refuse lengths longer than the rest of the input
	// before they reach it. Metadata and bodies are multiples of 8 bytes, so
	// every 4-byte read is one of these prefixes.
	if n == 4 && len(p) == 4 {
		if v := binary.LittleEndian.Uint32(p); v != 0xFFFFFFFF {
			if int64(v) > t.remaining()-4 {
				return 0, io.ErrUnexpectedEOF
			}
			t.metaLen = int64(v)
		}
	}
	t.count(p[:n])
	return n, err
}

func (t *tailReader) count(p []byte) {
	n := len(p)
	if n > 0 {
		t.n += int64(n)
		if n >= 8 {
			copy(t.tail[:], p[n-8:n])
		} else {
			copy(t.tail[:], t.tail[n:])
			copy(t.tail[8-n:], p[:n])
		}
	}
}

func (t *tailReader) sawEOS() bool {
	return t.n >= 8 && t.tail == [8]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
}

func (t *tailReader) remaining() int64 {
	if t.size < 0 {
		return 1 << 40
	}
	return t.size - t.n
}

var errTooLarge = errors.New("trace: allocation larger than the rest of the input")

// boundedAllocator refuses buffers larger than the format allows for the
// input, so a corrupt length field cannot make the reader allocate
// gigabytes. Every buffer the IPC reader asks for holds data of the input:
// a message's metadata or body (no longer than what is left of the input,
// which tailReader checks for metadata), or a dictionary concatenated from
// the deltas read so far (no longer than what was read). So none is longer
// than the input, and arrow's resizable buffers, which grow to the next
// power of two, at most twice that. When the input's size is unknown, the
// rest of it counts as 1 TiB.
//
// It also recycles the message bodies of released batches: each batch is read
// into a buffer that the previous batch just gave back, so reading a long
// trace neither clears nor allocates fresh memory per batch. Recycled memory
// is not zeroed; the IPC reader overwrites every byte it hands out.
type boundedAllocator struct {
	src  *tailReader
	mu   sync.Mutex
	free [][]byte
}

func (a *boundedAllocator) limit() int64 {
	return 2*(a.src.n+a.src.remaining()) + 4096
}

func (a *boundedAllocator) Allocate(size int) []byte {
	if int64(size) > a.limit() {
		panic(errTooLarge)
	}
	a.mu.Lock()
	for i, b := range a.free {
		if cap(b) >= size && cap(b) <= 2*size+4096 {
			a.free[i] = a.free[len(a.free)-1]
			a.free = a.free[:len(a.free)-1]
			a.mu.Unlock()
			return b[:size]
		}
	}
	a.mu.Unlock()
	if size >= grow.HugeMin {
		// A message body: fresh memory that the read touches at once.
		return grow.Make[byte](size, size)
	}
	return memory.DefaultAllocator.Allocate(size)
}

func (a *boundedAllocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	if int64(size) > a.limit() {
		panic(errTooLarge)
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

func (a *boundedAllocator) Free(b []byte) {
	if cap(b) < 64<<10 {
		return // small buffers: let the GC have them
	}
	a.mu.Lock()
	if len(a.free) < 64 {
		a.free = append(a.free, b[:0])
	}
	a.mu.Unlock()
}
