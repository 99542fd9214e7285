package torchsnap

import (
	"sync/atomic"

	"github.com/tracer-dev/tracer/trace"
)

// storeFollow hands the events of ReadFileMappedFollowed's store to a
// follower as they are packed (pack.go), in order, on a goroutine of its
// own: what a spill's writer does for OpenFollowed, so that an import that
// decodes a file in memory has the start state (Forward) when decoding
// ends, instead of deriving it from the whole trace after (parallelStart,
// on the import's critical path).
//
// The packing goes on while the follower works: each packed range is
// copied, as records, for the follower, and the packer never waits for
// it. Where the follower falls behind by more than followMax events (it
// runs on one core, and a trace of many live addresses costs it more per
// event than the regions' packing), or where the events do not come in
// order from 0, the follower is dropped: it is handed nothing more, and
// Followed then reports that it did not see the device's events, so that
// the start state is derived as before.
type storeFollow struct {
	follow  func([]trace.Event)
	next    int64 // the index of the next event it expects
	dropped bool
	pending atomic.Int64 // events handed on and not yet followed
	gone    atomic.Bool  // dropped, as the follower's goroutine sees it

	work chan followWrite
	free chan []srec // buffers the follower is done with
	done chan struct{}
	wide []cev
}

type followWrite struct {
	recs []srec
	at   int64 // the index of recs[0]
}

// followMax is the most events a follower may be behind the packing (56
// bytes each): a region commits up to a chunk of about 25,000 at once.
var followMax int64 = 1 << 16

func newStoreFollow(follow func([]trace.Event)) *storeFollow {
	f := &storeFollow{follow: follow, work: make(chan followWrite, 256),
		free: make(chan []srec, 4), done: make(chan struct{}), wide: make([]cev, spillChunk)}
	go f.run()
	return f
}

// run hands each range to follow, a spill's chunk at a time, widened, as
// the spill's writer does. Once the follower is dropped, it hands on
// nothing more, and calls follow(nil) once, so that the follower can let
// go of what it holds before decoding ends.
func (f *storeFollow) run() {
	defer close(f.done)
	told := false
	tell := func() bool {
		if f.gone.Load() && !told {
			f.follow(nil)
			told = true
		}
		return told
	}
	defer tell()
	for w := range f.work {
		for lo := 0; lo < len(w.recs) && !tell(); lo += spillChunk {
			recs := w.recs[lo:min(len(w.recs), lo+spillChunk)]
			wide := f.wide[:len(recs)]
			for j := range recs {
				recs[j].widen(&wide[j], w.at+int64(lo+j), 0)
			}
			f.follow(wide)
			f.pending.Add(-int64(len(recs)))
		}
		select {
		case f.free <- w.recs[:0]:
		default:
		}
	}
}

// recs follows recs, the records of events [lo, lo+len(recs)).
func (f *storeFollow) recs(recs []srec, lo int64) {
	if buf := f.take(lo, len(recs)); buf != nil {
		copy(buf, recs)
		f.send(buf, lo)
	}
}

// events follows evs, events [lo, lo+len(evs)) in their final form.
func (f *storeFollow) events(evs []cev, lo int64) {
	if buf := f.take(lo, len(evs)); buf != nil {
		for j := range buf {
			buf[j].pack(&evs[j])
		}
		f.send(buf, lo)
	}
}

// take returns a buffer for the n events from lo on, or nil, having
// dropped the follower, where they are not the next it expects or it is
// too far behind.
func (f *storeFollow) take(lo int64, n int) []srec {
	if f == nil || f.dropped || n == 0 {
		return nil
	}
	if lo != f.next || f.pending.Load()+int64(n) > followMax {
		f.drop()
		return nil
	}
	select {
	case b := <-f.free:
		if cap(b) >= n {
			return b[:n]
		}
	default:
	}
	return make([]srec, n)
}

// send hands buf, events [lo, lo+len(buf)), to the follower.
func (f *storeFollow) send(buf []srec, lo int64) {
	f.pending.Add(int64(len(buf)))
	select {
	case f.work <- followWrite{buf, lo}:
		f.next += int64(len(buf))
	default: // 256 ranges behind
		f.pending.Add(-int64(len(buf)))
		f.drop()
	}
}

// drop stops following: nothing more is handed to the follower.
func (f *storeFollow) drop() {
	f.dropped = true
	f.gone.Store(true)
	if followDropped != nil {
		followDropped()
	}
}

// followDropped, if set, is called when a follower is dropped (tests).
var followDropped func()

// finish waits for the follower to return from its last call. It reports
// how many events the follower was given, in order from 0, and whether it
// was given every event it was offered (false: dropped).
func (f *storeFollow) finish() (n int64, whole bool) {
	if f == nil {
		return 0, false
	}
	close(f.work)
	<-f.done
	if f.dropped {
		return 0, false
	}
	return f.next, true
}

// startFollow makes the store's follower for follow, where it is not nil
// and the events are packed (an off-heap store).
func (b *builder) startFollow(follow func([]trace.Event)) {
	if follow != nil && b.events.mapped != nil {
		b.events.follow = newStoreFollow(follow)
	}
}

// finishFollow stops the store's follower, if any, and notes on s's
// devices (s may be nil: a failed decode) how many events it was given.
func (b *builder) finishFollow(s *Snapshot) {
	f := b.events.follow
	if f == nil {
		return
	}
	b.events.follow = nil
	n, whole := f.finish()
	if s == nil {
		return
	}
	for _, d := range s.Devices {
		d.followN = -1
		if whole {
			d.followN = n
		}
	}
}
