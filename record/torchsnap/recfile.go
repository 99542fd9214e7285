package torchsnap

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// scratchMax is the largest file whose packed records ReadFileMappedIn
// keeps in a scratch file (recFile) rather than in its mapping. A mid-size
// file's records (56 bytes an event, two thirds of the file's bytes) would
// otherwise be most of its import's memory beside the process's own and
// the decoder's; larger files are within twice their size with the
// records in memory, and their decode is left as it was.
const scratchMax = 64 << 20

// recFile holds the records of ReadFileMappedIn's packed events (pack.go)
// in an unlinked file, as a spill holds Open's: the packer writes each
// committed range with pwrite and gives the mapping's pages of those
// events back, and the passes read them back a chunk at a time with
// pread (readAs), so the records are page cache, never the process's
// memory. Record i lies at 56i.
type recFile struct {
	f    *os.File
	name string // to remove at close, where it could not be unlinked at once
	buf  []srec // the packer's, for the records it writes
}

// recFileBuf is how many records the packer converts and writes at a time.
const recFileBuf = 4096

// newRecFile creates a recFile in dir, unlinked at once.
func newRecFile(dir string) (*recFile, error) {
	f, err := os.CreateTemp(dir, ".tracer-records-*")
	if err != nil {
		return nil, fmt.Errorf("scratch file: %w", err)
	}
	r := &recFile{f: f}
	if os.Remove(f.Name()) != nil {
		r.name = f.Name() // systems that cannot remove an open file: at close
	}
	return r, nil
}

// write writes the records of evs as records lo, lo+1, …
func (r *recFile) write(evs []cev, lo int64) error {
	if r.buf == nil {
		r.buf = make([]srec, recFileBuf)
	}
	for len(evs) > 0 {
		n := min(len(evs), len(r.buf))
		for j := range n {
			e, x := &evs[j], &r.buf[j]
			x.TimeUs, x.Addr, x.Size, x.Stream, x.Pool, x.Stack, x.Kind = e.TimeUs, e.Addr, e.Size, e.Stream, e.Pool, e.Stack, e.Kind
		}
		if _, err := r.f.WriteAt(recBytes(r.buf[:n]), lo*recSize); err != nil {
			return fmt.Errorf("scratch file: %w", err)
		}
		evs, lo = evs[n:], lo+int64(n)
	}
	return nil
}

// readAs fills dst with the events of records [lo, lo+len(dst)), with Seq
// seq0, seq0+1, … and Device dev. It may run on several goroutines at
// once: the records are read into dst's tail and widened from its front,
// as a spill's are.
func (r *recFile) readAs(dst []cev, lo, seq0 int64, dev int32) error {
	if len(dst) == 0 {
		return nil
	}
	recs := tailRecords(dst)
	if err := r.read(recs, lo); err != nil {
		return err
	}
	for j := range recs {
		recs[j].widen(&dst[j], seq0+int64(j), dev)
	}
	return nil
}

// read fills recs with records [lo, lo+len(recs)).
func (r *recFile) read(recs []srec, lo int64) error {
	if _, err := r.f.ReadAt(recBytes(recs), lo*recSize); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("scratch file: %w", err)
	}
	return nil
}

func (r *recFile) close() {
	if r != nil && r.f != nil {
		r.f.Close()
		r.f = nil
		if r.name != "" {
			os.Remove(r.name)
		}
	}
}
