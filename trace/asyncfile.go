package trace

import (
	"os"
	"sync/atomic"
	"time"
)

const (
	// asyncBlock is the size of the blocks a Create'd trace is written in,
	// and asyncBlocks how many may be in flight; liveBlocks for a live
	// recording (WriterOptions.Live), whose encoder hands over a whole
	// batch (about 5 MiB) at a time and should not wait for the file while
	// it does (16 MiB). Blocks are allocated as needed, up to that many:
	// each is memory the process faults in. An import's writes (a batch
	// copied out in one burst, then the next laid out) are bound by the
	// file either way, so its window of 1 MiB costs it nothing and leaves
	// Close less to wait for.
	asyncBlock  = 256 << 10
	asyncBlocks = 4
	liveBlocks  = 64
	// In a live recording, an fsync starts beside the writes, one
	// at a time, once liveSyncEvery bytes were written since the last one
	// began, or once written bytes have waited liveSyncAge for one; syncs
	// follow the writes closely (about one per batch at full speed), so
	// that Close waits only for the last few MiB. An output put in place
	// at Close (an import, a replay's output) is not synced at all: see
	// Create.
	liveSyncEvery = 4 << 20
	liveSyncAge   = time.Second
)

// asyncFile is the output of a trace that Create writes: writes are copied
// into blocks that a goroutine of its own writes, and, for a live
// recording, it syncs what it wrote as it goes, beside the writes. The
// producer (an import, a replay, a live recording's encoder) converts events
// while the write calls run, and the fsync that Close does for a live
// recording waits only for the tail.
//
// A live recording's trace (in its partial file) is handed over at the end of
// each batch (push). The guarantee that a killed recording leaves a trace
// readable up to its last batch needs no fsync: what write(2) took is in the
// page cache, which outlives the process, and the goroutine writes the
// blocks in order, so the file holds a prefix of the stream, whole batches
// and at most one partial one, which the reader reports as a cut. A kill
// loses only the batches handed over but not yet written, normally none (the
// goroutine writes each as it comes; at most liveBlocks blocks, 16 MiB,
// wait). The syncs are for the machine going down (power loss, a kernel
// crash): that loses what was written since the last sync began, at most
// about liveSyncEvery bytes and the writes during one sync at full speed,
// or liveSyncAge and one sync of a slow recording, as when a sync followed
// every batch.
type asyncFile struct {
	f          *os.File
	buf        []byte        // the block being filled
	full, free chan []byte   // blocks to write, and blocks written
	made, max  int           // blocks allocated so far, and the most there may be
	done       chan struct{} // closed when the writing goroutine ends
	err        error         // the goroutine's first error; read after done, or once failed is set
	failed     atomic.Bool   // err is set (and final)
	finished   bool
	syncEvery  int64 // bytes written between the starts of two fsyncs
}

// newAsyncFile writes to f through blocks of asyncBlock bytes, at most
// blocks of them in flight, and starts an fsync every syncEvery bytes (or
// liveSyncAge); never when syncEvery is 0.
func newAsyncFile(f *os.File, blocks int, syncEvery int64) *asyncFile {
	o := &asyncFile{f: f, full: make(chan []byte, blocks), free: make(chan []byte, blocks), max: blocks,
		done: make(chan struct{}), syncEvery: syncEvery}
	go o.writeLoop()
	return o
}

// writeLoop writes the blocks handed over, and starts an fsync of what is
// written (one at a time, beside the writes) every syncEvery bytes or when
// written bytes have waited liveSyncAge (unless syncEvery is 0); it ends once the last block is
// written and the last fsync started is done.
func (o *asyncFile) writeLoop() {
	defer close(o.done)
	var (
		written, synced int64      // bytes written, and bytes synced or being synced
		oldest          time.Time  // when the first bytes not yet being synced were written
		syncing         chan error // the fsync in flight, if any
		timer           *time.Timer
	)
	fail := func(err error) {
		if err != nil && o.err == nil {
			o.err = err
			o.failed.Store(true)
		}
	}
	startSync := func() {
		synced = written
		syncing = make(chan error, 1)
		go func(ch chan<- error) { ch <- o.f.Sync() }(syncing)
	}
	full := o.full
	for full != nil || syncing != nil {
		var due <-chan time.Time
		if o.syncEvery > 0 && syncing == nil && written > synced && o.err == nil {
			wait := liveSyncAge - time.Since(oldest)
			if timer == nil {
				timer = time.NewTimer(wait)
				defer timer.Stop()
			} else {
				timer.Reset(wait)
			}
			due = timer.C
		}
		select {
		case b, ok := <-full:
			if !ok {
				full = nil
				continue
			}
			if o.err == nil {
				if written == synced {
					oldest = time.Now()
				}
				_, err := o.f.Write(b)
				fail(err)
				if o.syncEvery > 0 && err == nil {
					startWriteback(o.f, written, int64(len(b)))
				}
				written += int64(len(b))
			}
			o.free <- b[:0]
			if o.syncEvery > 0 && syncing == nil && o.err == nil && written-synced >= o.syncEvery {
				startSync()
			}
		case err := <-syncing:
			fail(err)
			syncing = nil
			if o.syncEvery > 0 && o.err == nil && written-synced >= o.syncEvery {
				startSync()
			}
		case <-due:
			startSync()
		}
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
			o.buf = o.block()
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

// block returns an empty block to fill: one the goroutine has written, or
// a new one while fewer than max exist, or else the next one it writes.
func (o *asyncFile) block() []byte {
	select {
	case b := <-o.free:
		return b
	default:
	}
	if o.made < o.max {
		o.made++
		return make([]byte, 0, asyncBlock)
	}
	return <-o.free
}

// push hands the block being filled, if it holds anything, to the writing
// goroutine.
func (o *asyncFile) push() {
	if len(o.buf) > 0 {
		o.full <- o.buf
		o.buf = nil
	}
}

// finish hands over the last block and waits until everything handed over
// is written and the last fsync started is done; it returns the first error.
// The file stays open.
func (o *asyncFile) finish() error {
	if !o.finished {
		o.finished = true
		if !o.failed.Load() {
			o.push()
		}
		o.buf = nil
		close(o.full)
	}
	<-o.done
	return o.err
}
