package record

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

const (
	// outBuf is the size of the blocks an import's output is written in, and
	// outBufs how many may be in flight.
	outBuf  = 1 << 20
	outBufs = 4
	// syncEvery is how many bytes an import writes between the fsyncs of
	// its output that the writing goroutine starts as it goes.
	syncEvery = 16 << 20
)

// outFile is an import's output: a temporary file beside the destination
// that commit renames into place, so that a failed import leaves nothing.
// Writes are buffered and done by a goroutine of its own, which also starts
// an fsync every syncEvery bytes, beside the writes: the disk works while the
// import converts, and the last fsync before the rename (done for
// durability, as trace.Create's Close does) waits only for the tail.
type outFile struct {
	f          *os.File
	tmp, final string
	buf        []byte        // the block being filled
	full, free chan []byte   // blocks to write, and blocks written
	done       chan struct{} // closed when the writing goroutine ends
	err        error         // the writing goroutine's first error; read after done or failed
	failed     atomic.Bool   // err is set (and final)
	closed     bool
}

func createOut(path string) (*outFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err == nil {
		// CreateTemp makes the file private; a trace is an ordinary output.
		if err = f.Chmod(0o644); err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("trace: create %s: %w", path, err)
	}
	o := &outFile{f: f, tmp: f.Name(), final: path,
		full: make(chan []byte, outBufs), free: make(chan []byte, outBufs), done: make(chan struct{})}
	for range outBufs {
		o.free <- make([]byte, 0, outBuf)
	}
	go o.writeLoop()
	return o, nil
}

// writeLoop writes the blocks handed over, starting an fsync of what is
// written every syncEvery bytes, beside the writes (one at a time).
func (o *outFile) writeLoop() {
	defer close(o.done)
	var (
		written, synced int64
		syncing         chan error // the fsync in flight, if any
	)
	fail := func(err error) {
		if err != nil && o.err == nil {
			o.err = err
			o.failed.Store(true)
		}
	}
	for b := range o.full {
		if o.err == nil {
			_, err := o.f.Write(b)
			fail(err)
			written += int64(len(b))
		}
		o.free <- b[:0]
		if syncing != nil {
			select {
			case err := <-syncing:
				fail(err)
				syncing = nil
			default:
			}
		}
		if syncing == nil && o.err == nil && written-synced >= syncEvery {
			synced = written
			syncing = make(chan error, 1)
			go func(ch chan<- error) { ch <- o.f.Sync() }(syncing)
		}
	}
	if syncing != nil {
		fail(<-syncing)
	}
}

// Write copies p into the block being filled, handing full blocks to the
// writing goroutine. It reports the goroutine's error, if any yet.
func (o *outFile) Write(p []byte) (int, error) {
	if o.failed.Load() {
		return 0, o.err // set before failed, and never again
	}
	n := len(p)
	for len(p) > 0 {
		if o.buf == nil {
			o.buf = <-o.free
		}
		k := copy(o.buf[len(o.buf):cap(o.buf)], p)
		o.buf, p = o.buf[:len(o.buf)+k], p[k:]
		if len(o.buf) == cap(o.buf) {
			o.full <- o.buf
			o.buf = nil
		}
	}
	return n, nil
}

// finish hands over the last block and waits for the writing goroutine.
func (o *outFile) finish() error {
	if !o.closed {
		o.closed = true
		if len(o.buf) > 0 && !o.failed.Load() {
			o.full <- o.buf
		}
		o.buf = nil
		close(o.full)
	}
	<-o.done
	return o.err
}

// commit syncs the file and renames it into place; on failure it removes it.
func (o *outFile) commit() error {
	err := o.finish()
	if err == nil {
		err = o.f.Sync()
	}
	if err != nil {
		err = fmt.Errorf("trace: write %s: %w", o.final, err)
	}
	if cerr := o.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("trace: close %s: %w", o.final, cerr)
	}
	if err == nil {
		if rerr := os.Rename(o.tmp, o.final); rerr != nil {
			err = fmt.Errorf("trace: %w", rerr)
		}
	}
	if err != nil {
		os.Remove(o.tmp)
	}
	return err
}

// abort removes the file.
func (o *outFile) abort() {
	o.finish()
	o.f.Close()
	os.Remove(o.tmp)
}
