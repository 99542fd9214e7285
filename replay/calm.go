package replay

import (
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// calmRun replays evs from i on while each event is a request of r's
// device that batch's calm cases take: a plain alloc in the default pools
// (while r.calmAlloc) or a free_requested followed by its free_completed
// (calmPair). r is calm and holds no event. Neither request changes what
// recalm tests, so the tests of r's state are made once for the run rather
// than once per event, and the requests are alloc's and freePair's work
// written out. It returns the index of the first event it did not replay,
// and the index peek has reached.
func (r *deviceReplay) calmRun(evs []trace.Event, i, peekAt int) (int, int, error) {
	allocs, dev, start, peeks := r.calmAlloc, r.device, i, !r.numbered
	var err error
	for ; i < len(evs); i++ {
		if peeks && i >= peekAt {
			peekAt = min(i+peekAhead, len(evs))
			r.peek(evs[i:peekAt])
		}
		ev := &evs[i]
		if ev.Device != dev || ev.Flags&trace.FlagReconstructed != 0 {
			break
		}
		if ev.Kind == trace.KindAlloc {
			if !allocs || !ev.Pool.IsDefault() {
				break
			}
			// alloc, written out.
			r.called.request(ev)
			r.curTime, r.curStack = ev.TimeUs, ev.Stack
			r.expectEv(ev)
			if len(r.followSegs) > 0 {
				r.follow()
			}
			addr, h, aerr := r.a.MallocHandle(ev.Size, ev.Stream)
			r.clearPlan()
			if aerr != nil {
				if err = r.allocFailed(ev, aerr); err != nil {
					err = eventError(ev, err)
					i++
					break
				}
				continue
			}
			if !r.live.putNumbered(ev.Addr, r.ref(ev), addr, h) {
				r.live.put(ev.Addr, r.ref(ev), blockRef{addr, h})
			}
			if r.annotate {
				r.placed(ev, addr, h)
			}
			continue
		}
		if ev.Kind != trace.KindFreeRequested || i+1 >= len(evs) {
			break
		}
		next := &evs[i+1]
		if next.Kind != trace.KindFreeCompleted || next.Addr != ev.Addr || next.Device != dev {
			break
		}
		i++
		if err = r.freeCalm(ev, next); err != nil {
			err = eventError(next, err)
			i++
			break
		}
	}
	r.res.Events += int64(i - start)
	if err != nil {
		i--
	}
	return i, peekAt, err
}

// allocFailed ends alloc's request ev, whose malloc failed with err: an
// OOM is noted, any other error returned.
func (r *deviceReplay) allocFailed(ev *trace.Event, err error) error {
	if !allocator.IsOOM(err) {
		return err
	}
	if r.annotate {
		r.leave(ev)
	}
	r.oom(ev, false)
	r.live.del(ev.Addr, r.ref(ev)) // the recorded address names no block of the replay now
	return nil
}
