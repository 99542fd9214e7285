package torchsnap

import (
	"io"

	"github.com/tracer-dev/tracer/internal/grow"
)

// Files of readAheadMin bytes or more are read ahead, in readAheadBlocks
// blocks of readAheadBlock bytes, by a goroutine of their own: the read
// system calls (copying the file out of the page cache) then overlap the
// decoding, which is single-threaded. A read of a block takes a small
// fraction of the time decoding it does, so a window of 1 MiB keeps the
// decoder fed; the blocks are memory the process faults in (at about a
// millisecond per MiB, more than reading it), so the window is no larger.
const (
	readAheadMin    = 4 << 20
	readAheadBlock  = 256 << 10
	readAheadBlocks = 4
	// spillReadAhead is the block size for Open, whose memory should not
	// be spent on a window: 256 KiB in all.
	spillReadAhead = 64 << 10
)

type readAhead struct {
	full       chan block
	free       chan []byte
	stop, done chan struct{}
	cur, buf   []byte // the unread part of the current block, and its buffer
	err        error  // after cur: the reader's error (io.EOF at the end)
}

type block struct {
	b   []byte
	err error
}

func newReadAhead(r io.Reader) *readAhead { return newReadAheadSized(r, readAheadBlock, nil) }

// newReadAheadSized reads ahead in readAheadBlocks blocks of size bytes,
// made in off when it is not nil (to be released once close returns).
func newReadAheadSized(r io.Reader, size int, off *grow.OffHeap) *readAhead {
	ra := &readAhead{full: make(chan block, readAheadBlocks), free: make(chan []byte, readAheadBlocks),
		stop: make(chan struct{}), done: make(chan struct{})}
	for range readAheadBlocks {
		ra.free <- makeOff[byte](off, size, size)
	}
	go func() {
		defer close(ra.done)
		for {
			var buf []byte
			select {
			case buf = <-ra.free:
			case <-ra.stop:
				return
			}
			n, err := io.ReadFull(r, buf)
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			select {
			case ra.full <- block{buf[:n], err}:
			case <-ra.stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ra
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.buf != nil {
			ra.free <- ra.buf[:cap(ra.buf)]
			ra.buf = nil
		}
		if ra.err != nil {
			return 0, ra.err
		}
		b := <-ra.full
		ra.cur, ra.buf, ra.err = b.b, b.b, b.err
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// close stops the reading goroutine and waits for it to end.
func (ra *readAhead) close() {
	close(ra.stop)
	<-ra.done
}
