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
//
// Writing a chunk costs about as much as decoding it (the kernel allocates
// and fills page-cache pages), so a goroutine of the spill's own writes
// while the decoder fills the next buffer.
type spill struct {
	f       *os.File
	name    string // to remove at close, where it could not be unlinked at once
	buf     []cev  // events [flushed, flushed+len(buf)), not yet handed to the writer
	flushed int64  // events handed to the writer
	err     error  // the first write error, once the writer has stopped

	// The writer takes buffers from work and hands each back on free once
	// written; done receives its first error when work is closed. Of the
	// spillBuffers buffers, buf is the decoder's, and the others are on
	// free or being written. work is nil once the writer has stopped.
	work chan spillWrite
	free chan []cev
	done chan error
}

type spillWrite struct {
	evs []cev
	at  int64 // first event's index
}

// spillBuffers is how many buffers a spill fills and writes in turn.
const spillBuffers = 2

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
	s := &spill{f: f, buf: make([]cev, 0, spillChunk), work: make(chan spillWrite, spillBuffers),
		free: make(chan []cev, spillBuffers), done: make(chan error, 1)}
	if os.Remove(f.Name()) != nil {
		// Systems that cannot remove an open file (Windows): at close.
		s.name = f.Name()
	}
	for range spillBuffers - 1 {
		s.free <- make([]cev, 0, spillChunk)
	}
	go s.writer(s.work, s.free, s.done)
	return s, nil
}

// writer writes the buffers handed to it in order, and reports its first
// error once work is closed; after an error it only hands buffers back.
func (s *spill) writer(work <-chan spillWrite, free chan<- []cev, done chan<- error) {
	var err error
	for w := range work {
		if err == nil {
			if _, werr := s.f.WriteAt(evBytes(w.evs), w.at*evSize); werr != nil {
				err = fmt.Errorf("spill file: %w", werr)
			}
		}
		free <- w.evs[:0]
	}
	done <- err
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

// flush hands the buffered events to the writer and takes another buffer.
func (s *spill) flush() {
	if len(s.buf) == 0 || s.work == nil {
		return
	}
	s.work <- spillWrite{s.buf, s.flushed}
	s.flushed += int64(len(s.buf))
	s.buf = <-s.free
}

// wait returns once everything handed to the writer is written: when every
// buffer but the decoder's is back.
func (s *spill) wait() {
	var back [spillBuffers - 1][]cev
	for i := range back {
		back[i] = <-s.free
	}
	for _, b := range back {
		s.free <- b
	}
}

// finish writes what is buffered, stops the writer and frees the buffers:
// from then on the events are read from the file only.
func (s *spill) finish() error {
	if s.work == nil {
		return s.err
	}
	s.flush()
	close(s.work)
	s.work = nil
	s.err = <-s.done
	s.buf, s.free = nil, nil
	return s.err
}

// readAt fills dst with events [lo, lo+len(dst)).
func (s *spill) readAt(dst []cev, lo int64) error {
	if s.work != nil {
		s.wait() // while decoding (gather, for a list that is not a run)
	}
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
	if s != nil && s.work != nil {
		s.finish()
	}
	if s != nil && s.f != nil {
		s.f.Close()
		s.f = nil
		if s.name != "" {
			os.Remove(s.name)
		}
	}
}
