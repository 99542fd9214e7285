package torchsnap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/tracer-dev/tracer/trace"
)

// A spill holds a snapshot's decoded events in a temporary file instead of
// memory, for Open: events are appended in order, spillChunk at a time, and
// read back a range at a time by the passes over a device's trace. The file
// is unlinked as soon as it is created, so nothing is left behind whatever
// happens to the process; its pages live in the page cache, which is not
// the process's memory (it is read and written with pread and pwrite, never
// mapped). trace.Event holds no pointers, so a chunk is written and read as
// its raw bytes; the file is private to this process and never outlives it.
type spill struct {
	f       *os.File
	name    string // to remove at close, where it could not be unlinked at once
	buf     []cev  // events [flushed, flushed+len(buf)), not yet written
	flushed int64
	err     error // the first write error
}

// spillChunk is how many events a spill buffers before writing them (88
// KiB), and the size of the ranges the passes over a spilled trace read:
// an import holds about eight such buffers at once (0.5 MB less at 1024
// than at 2048 events, for a few more system calls).
const spillChunk = 1024

const evSize = int64(unsafe.Sizeof(trace.Event{}))

// newSpill creates a spill in dir (os.TempDir() when empty).
func newSpill(dir string) (*spill, error) {
	f, err := os.CreateTemp(dir, ".tracer-spill-*")
	if err != nil {
		return nil, fmt.Errorf("spill file: %w", err)
	}
	s := &spill{f: f, buf: make([]cev, 0, spillChunk)}
	if os.Remove(f.Name()) != nil {
		// Systems that cannot remove an open file (Windows): at close.
		s.name = f.Name()
	}
	return s, nil
}

func evBytes(evs []cev) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(evs))), int64(len(evs))*evSize)
}

// add appends e, which is event n of the spill.
func (s *spill) add(e *cev) {
	s.buf = append(s.buf, *e)
	if len(s.buf) == cap(s.buf) {
		s.flush()
	}
}

func (s *spill) flush() {
	if len(s.buf) == 0 {
		return
	}
	if s.err == nil {
		if _, err := s.f.WriteAt(evBytes(s.buf), s.flushed*evSize); err != nil {
			s.err = fmt.Errorf("spill file: %w", err)
		}
	}
	s.flushed += int64(len(s.buf))
	s.buf = s.buf[:0]
}

// finish writes what is buffered and frees the buffer: from then on the
// events are read from the file only.
func (s *spill) finish() error {
	s.flush()
	s.buf = nil
	return s.err
}

// readAt fills dst with events [lo, lo+len(dst)).
func (s *spill) readAt(dst []cev, lo int64) error {
	inFile := min(int64(len(dst)), max(0, s.flushed-lo))
	if inFile > 0 {
		if _, err := s.f.ReadAt(evBytes(dst[:inFile]), lo*evSize); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("spill file: %w", err)
		}
	}
	if rest := dst[inFile:]; len(rest) > 0 {
		off := lo + inFile - s.flushed
		if off < 0 || off+int64(len(rest)) > int64(len(s.buf)) {
			return errors.New("spill file: read past the end")
		}
		copy(rest, s.buf[off:])
	}
	return nil
}

func (s *spill) close() {
	if s != nil && s.f != nil {
		s.f.Close()
		s.f = nil
		if s.name != "" {
			os.Remove(s.name)
		}
	}
}
