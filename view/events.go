package view

import (
	"bufio"
	"os"
	"runtime"
	"unsafe"
)

// eventSize is the bytes of one event as the store writes it.
const eventSize = int(unsafe.Sizeof(event{}))

// eventStore collects a trace's events while it loads. Where it can, it
// writes them to an unlinked temporary file and maps the file once the
// load is complete: the events, most of a view's memory, then live in the
// page cache, which the kernel may drop and read again, rather than in the
// Go heap (which would keep them, and the garbage of growing them, for as
// long as the server runs). Elsewhere, or when the file cannot be made,
// they stay in a slice. An event holds no pointer, so it may live outside
// the heap.
type eventStore struct {
	f     *os.File
	w     *bufio.Writer
	chunk []event // events not yet written
	heap  []event // the fallback
	n     int64
}

const storeChunk = 4096

func newEventStore() *eventStore {
	s := &eventStore{}
	if !canMap {
		return s
	}
	f, err := os.CreateTemp("", "tracer-view-*.events")
	if err != nil {
		return s
	}
	// Unlinked at once: the open file stays, and nothing is left behind
	// however the process ends.
	os.Remove(f.Name())
	s.f, s.w = f, bufio.NewWriterSize(f, 1<<20)
	s.chunk = make([]event, 0, storeChunk)
	return s
}

func (s *eventStore) add(e event) {
	s.n++
	if s.f == nil {
		s.heap = append(s.heap, e)
		return
	}
	s.chunk = append(s.chunk, e)
	if len(s.chunk) == storeChunk {
		s.flush()
	}
}

// flush writes the chunk; on an error the store falls back to the heap,
// reading back what it wrote.
func (s *eventStore) flush() {
	if s.f == nil || len(s.chunk) == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s.chunk))), len(s.chunk)*eventSize)
	if _, err := s.w.Write(b); err != nil {
		s.fallBack()
		return
	}
	s.chunk = s.chunk[:0]
}

// fallBack moves the events to the heap and drops the file.
func (s *eventStore) fallBack() {
	written := s.n - int64(len(s.chunk))
	if s.w.Flush() == nil {
		if evs, err := readEvents(s.f, written); err == nil {
			s.heap = evs
		}
	}
	s.heap = append(s.heap, s.chunk...)
	s.f.Close()
	s.f, s.w, s.chunk = nil, nil, nil
	if int64(len(s.heap)) != s.n {
		panic("invariant violation: the event store lost events falling back to the heap")
	}
}

// events ends the load and returns the events: mapped from the file, or
// the heap's. owner is the object whose life the mapping follows.
func (s *eventStore) events(owner *Trace) []event {
	if s.f == nil {
		return s.heap
	}
	s.flush()
	if s.f != nil && s.w.Flush() != nil {
		s.fallBack()
	}
	if s.f == nil {
		return s.heap
	}
	defer s.f.Close() // the mapping keeps the file
	if s.n == 0 {
		return nil
	}
	m, err := mapFile(s.f, int(s.n)*eventSize)
	if err != nil {
		s.fallBack()
		return s.heap
	}
	runtime.AddCleanup(owner, unmap, m)
	return unsafe.Slice((*event)(unsafe.Pointer(unsafe.SliceData(m))), s.n)
}

// readEvents reads n events back from the start of f.
func readEvents(f *os.File, n int64) ([]event, error) {
	evs := make([]event, n)
	if n == 0 {
		return evs, nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(evs))), int(n)*eventSize)
	_, err := f.ReadAt(b, 0)
	return evs, err
}

// close drops the file of a store whose events are not wanted.
func (s *eventStore) close() {
	if s.f != nil {
		s.f.Close()
		s.f, s.w = nil, nil
	}
}
