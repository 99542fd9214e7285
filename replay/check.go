package replay

import (
	"fmt"
	"sync/atomic"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// The allocator's events as a replay sees them: converted to trace kinds,
// handed to the observer, and checked against the recorded ones event by
// event while the replay runs under the recorded settings.

// KindOf returns the trace kind of an allocator action (KindInvalid for an
// unknown one), for every producer that turns allocator events into a trace.
func KindOf(a allocator.Action) trace.Kind {
	if int(a) < len(kinds) {
		return kinds[a]
	}
	return trace.KindInvalid
}

// AllocatorEvent makes r the allocator's Observer (one interface call per
// event, where an ObserverFunc of a method value makes two).
func (r *deviceReplay) AllocatorEvent(e *allocator.Event) { r.emitted(e) }

// emitted reports an allocator event, converted, to the observer and, in
// Recorded mode, checks it against the recording.
func (r *deviceReplay) emitted(e *allocator.Event) {
	seq := r.outSeq
	r.outSeq++
	if r.pools.ix.at != nil {
		r.pools.ix.touched(e.Pool)
	}
	if r.recorded {
		r.check(seq, kinds[e.Action], e.Addr, e.Size, e.Stream)
	}
	if r.obs != nil {
		o := &r.out
		if r.slots != nil {
			o = r.slots.Slot()
		}
		// Field by field, every field: a composite literal is built aside
		// and copied, twice the stores per event.
		o.Seq, o.TimeUs, o.Device, o.Kind = seq, r.curTime, r.device, kinds[e.Action]
		o.Addr, o.Size, o.Stream, o.Pool = e.Addr, e.Size, e.Stream, trace.PoolID{A: e.Pool.A, B: e.Pool.B}
		o.Stack, o.Flags, o.BlockSize, o.DeviceUsed, o.Ref = r.curStack, 0, e.BlockSize, 0, 0
		r.obs.Event(o)
	}
}

// check compares the replayed event seq, of kind, at addr, of size, on
// stream, with the recorded event expected next.
func (r *deviceReplay) check(seq int64, kind trace.Kind, addr uint64, size int64, stream uint64) {
	if w := r.nextExpected(seq, kind, addr, size); w != nil && !matches(w, kind, addr, size, stream) {
		r.checkMismatch(w, kind, addr, size, stream)
	}
}

// nextExpected takes the recorded event expected next, the one the
// replayed event seq of kind (at addr, of size) is compared with; where
// none is, it notes that the recording does not have the replayed event,
// and returns nil.
func (r *deviceReplay) nextExpected(seq int64, kind trace.Kind, addr uint64, size int64) *trace.Event {
	if r.expectHead >= len(r.expect) {
		if len(r.res.Mismatches) >= r.opts.MaxMismatches {
			r.res.NumMismatches++
			return nil
		}
		r.mismatch(seq, "replay emitted %s %#x size %d that the recording does not have here", kind, addr, size)
		return nil
	}
	w := r.expect[r.expectHead]
	r.popExpected(1)
	return w
}

// checkMismatch reports a replayed event of kind (at addr, of size, on
// stream) that differs from the recorded w. Past the mismatches kept it
// only counts: the arguments boxed for the message would otherwise cost
// allocations per mismatch.
func (r *deviceReplay) checkMismatch(w *trace.Event, kind trace.Kind, addr uint64, size int64, stream uint64) {
	if len(r.res.Mismatches) >= r.opts.MaxMismatches {
		r.res.NumMismatches++
		return
	}
	r.mismatch(w.Seq, "recorded %s %#x size %d stream %d, replayed %s %#x size %d stream %d",
		w.Kind, w.Addr, w.Size, w.Stream, kind, addr, size, stream)
}

// mismatch counts a difference from the recording and keeps the first few,
// formatting only those: a replay that diverges early would otherwise spend
// its time printing messages nobody reads.
func (r *deviceReplay) mismatch(seq int64, format string, args ...any) {
	r.res.NumMismatches++
	if len(r.res.Mismatches) < r.opts.MaxMismatches {
		r.res.Mismatches = append(r.res.Mismatches, Mismatch{Seq: seq, What: fmt.Sprintf(format, args...)})
	}
}

// expectEv expects the recorded ev of the allocator, after the events it
// emitted so far are compared (checkPending, in the hand-off).
func (r *deviceReplay) expectEv(ev *trace.Event) {
	if r.recorded {
		if r.hand.to != nil {
			r.checkPending()
		}
		r.expect = append(r.expect, ev) // kept past its batch by keepExpected
	}
}

// expectCopies counts the recorded events keepExpected copied, for the
// tests that bound its work.
var expectCopies atomic.Int64

// keepExpected compares the hand-off's events so far (checkPending) and
// copies the recorded events still expected that are not copies yet,
// before the source reuses the memory they lie in (its batch, or heldBuf,
// which keepHeld rewrites): Run calls it where it calls keepHeld, before
// it. Nearly always none is left. Where many stay expected for long (a
// model that lags the recording, blocks pending on other streams), each
// is copied once, not once a batch, and the consumed head of expect is
// dropped once it is half the list: the work is amortised O(1) an event.
func (r *deviceReplay) keepExpected() {
	r.checkPending()
	from := max(r.expectHead, r.expectKeptTo)
	if fresh := r.expect[from:]; len(fresh) != 0 {
		expectCopies.Add(int64(len(fresh)))
		kept := make([]trace.Event, len(fresh))
		for i, w := range fresh {
			kept[i] = *w
			fresh[i] = &kept[i]
		}
	}
	r.expectKeptTo = len(r.expect)
	if h := r.expectHead; h != 0 && h >= len(r.expect)-h {
		n := copy(r.expect, r.expect[h:])
		clear(r.expect[n:])
		r.expect, r.expectHead, r.expectKeptTo = r.expect[:n], 0, n
	}
}
