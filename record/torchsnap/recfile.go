package torchsnap

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ScratchMax is the largest file whose packed records ReadFileMappedIn
// keeps in a scratch file (recFile) rather than in its mapping. A mid-size
// file's records (56 bytes an event, two thirds of the file's bytes) would
// otherwise be most of its import's memory beside the process's own and
// the decoder's; larger files are within twice their size with the
// records in memory, and their decode is left as it was.
const ScratchMax = 64 << 20

// recordFile is an unlinked file of records (srec), record i at 56i,
// written and read with pwrite and pread, never mapped, so that its pages
// are the page cache's, not the process's: a spill's (Open) and the
// scratch file of ReadFileMappedIn's packed records (recFile).
type recordFile struct {
	f    *os.File
	name string // to remove at close, where it could not be unlinked at once
	what string // for errors: "spill file", "scratch file"
}

// createRecordFile creates a recordFile in dir (os.TempDir() when empty),
// named by pattern, and unlinks it at once.
func createRecordFile(dir, pattern, what string) (recordFile, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return recordFile{}, fmt.Errorf("%s: %w", what, err)
	}
	r := recordFile{f: f, what: what}
	if os.Remove(f.Name()) != nil {
		r.name = f.Name() // systems that cannot remove an open file (Windows): at close
	}
	return r, nil
}

// writeRecs writes recs as records lo, lo+1, …
func (r *recordFile) writeRecs(recs []srec, lo int64) error {
	if _, err := r.f.WriteAt(recBytes(recs), lo*recSize); err != nil {
		return fmt.Errorf("%s: %w", r.what, err)
	}
	return nil
}

// readWide fills dst with the events of records [lo, lo+len(dst)), with
// Seq seq0, seq0+1, … and Device dev. Passes read the file on several
// goroutines at once, so its buffer for the records is the caller's dst: a
// record is smaller than an event, and the records read into dst's tail
// are widened from the front, each event written below the records still
// to be read.
func (r *recordFile) readWide(dst []cev, lo, seq0 int64, dev int32) error {
	if len(dst) == 0 {
		return nil
	}
	recs := tailRecords(dst)
	if err := r.readRecs(recs, lo); err != nil {
		return err
	}
	for j := range recs {
		// Event j may overlap record j, which widen reads first, but
		// ends at or below record j+1's start (tailRecords).
		recs[j].widen(&dst[j], seq0+int64(j), dev)
	}
	return nil
}

// readRecs fills recs with records [lo, lo+len(recs)).
func (r *recordFile) readRecs(recs []srec, lo int64) error {
	if _, err := r.f.ReadAt(recBytes(recs), lo*recSize); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%s: %w", r.what, err)
	}
	return nil
}

// closeFile closes the file, and removes it where it could not be
// unlinked at once.
func (r *recordFile) closeFile() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
		if r.name != "" {
			os.Remove(r.name)
		}
	}
}

// recFile holds the records of ReadFileMappedIn's packed events (pack.go)
// in a recordFile, as a spill holds Open's: the packer writes each
// committed range and gives the mapping's pages of those events back, and
// the passes read them back a chunk at a time (readWide), so the records
// are page cache, never the process's memory.
type recFile struct {
	recordFile
	buf []srec // the packer's, for the records it writes
}

// recFileBuf is how many records the packer converts and writes at a time.
const recFileBuf = 4096

// newRecFile creates a recFile in dir.
func newRecFile(dir string) (*recFile, error) {
	f, err := createRecordFile(dir, ".tracer-records-*", "scratch file")
	if err != nil {
		return nil, err
	}
	return &recFile{recordFile: f}, nil
}

// write writes the records of evs as records lo, lo+1, …
func (r *recFile) write(evs []cev, lo int64) error {
	if r.buf == nil {
		r.buf = make([]srec, recFileBuf)
	}
	for len(evs) > 0 {
		n := min(len(evs), len(r.buf))
		for j := range n {
			r.buf[j].pack(&evs[j])
		}
		if err := r.writeRecs(r.buf[:n], lo); err != nil {
			return err
		}
		evs, lo = evs[n:], lo+int64(n)
	}
	return nil
}

func (r *recFile) close() {
	if r != nil {
		r.closeFile()
	}
}
