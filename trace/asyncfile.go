package trace

import (
	"os"
	"sync/atomic"
)

const (
	// asyncBlock is the size of the blocks a Create'd trace is written in,
	// and asyncBlocks how many may be in flight.
	asyncBlock  = 1 << 20
	asyncBlocks = 4
	// asyncSyncEvery is how many bytes are written between the fsyncs the
	// writing goroutine starts as it goes.
	asyncSyncEvery = 16 << 20
)

// asyncFile is the output of a trace that Create writes to a temporary
// file: writes are copied into blocks that a goroutine of its own writes,
// and every asyncSyncEvery bytes it starts an fsync beside the writes. The
// disk works while the producer (an import, a replay) converts events, and
// the fsync that Close does before the rename waits only for the tail.
type asyncFile struct {
	f          *os.File
	buf        []byte        // the block being filled
	full, free chan []byte   // blocks to write, and blocks written
	done       chan struct{} // closed when the writing goroutine ends
	err        error         // the goroutine's first error; read after done, or once failed is set
	failed     atomic.Bool   // err is set (and final)
	finished   bool
}

func newAsyncFile(f *os.File) *asyncFile {
	o := &asyncFile{f: f, full: make(chan []byte, asyncBlocks), free: make(chan []byte, asyncBlocks), done: make(chan struct{})}
	for range asyncBlocks {
		o.free <- make([]byte, 0, asyncBlock)
	}
	go o.writeLoop()
	return o
}

// writeLoop writes the blocks handed over, starting an fsync of what is
// written every asyncSyncEvery bytes, beside the writes (one at a time).
func (o *asyncFile) writeLoop() {
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
		if syncing == nil && o.err == nil && written-synced >= asyncSyncEvery {
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
func (o *asyncFile) Write(p []byte) (int, error) {
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

// finish hands over the last block and waits until everything handed over
// is written; it returns the first write error. The file stays open.
func (o *asyncFile) finish() error {
	if !o.finished {
		o.finished = true
		if len(o.buf) > 0 && !o.failed.Load() {
			o.full <- o.buf
		}
		o.buf = nil
		close(o.full)
	}
	<-o.done
	return o.err
}
