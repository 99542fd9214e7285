package replay

import "github.com/tracer-dev/tracer/trace"

// calmRun replays evs from i on while each event is a request of r's
// device that batch's calm cases take: a plain alloc in the default pools
// (while r.calmAlloc) or a free_requested followed by its free_completed
// (calmPair). r is calm and holds no event. Neither request changes what
// recalm tests, so the tests of r's state are made once for the run rather
// than once per event. It returns the index of the first event it did not
// replay.
//
// Events found by address are peeked at (peek) 16 at a time; numbered
// ones are not, and their loop carries nothing of the peeks.
func (r *deviceReplay) calmRun(evs []trace.Event, i int) (int, error) {
	if r.numbered {
		return r.calmReqs(evs, i, len(evs))
	}
	for i < len(evs) {
		end := min(i+peekAhead, len(evs))
		r.peek(evs[i:end])
		j, err := r.calmReqs(evs, i, end)
		if err != nil || j < end {
			return j, err
		}
		i = j
	}
	return i, nil
}

// calmReqs is calmRun's loop over the requests that begin before end.
func (r *deviceReplay) calmReqs(evs []trace.Event, i, end int) (int, error) {
	if r.mayBare && r.bare() {
		return r.bareRun(evs, i, end)
	}
	for ; i < end; i++ {
		ev := &evs[i]
		if !r.calmTakes(ev) {
			break
		}
		if ev.Kind == trace.KindAlloc {
			if err := r.alloc(ev); err != nil {
				return i, eventError(ev, err)
			}
			if r.mayBare && r.bare() {
				// The run's first alloc followed the segment before it.
				return r.bareRun(evs, i+1, end)
			}
			continue
		}
		next := completion(evs, i)
		if next == nil {
			break
		}
		i++
		if err := r.freePair(ev, next); err != nil {
			return i, eventError(next, err)
		}
	}
	return i, nil
}

// calmTakes reports whether the calm loops may replay ev: an event of r's
// device, not reconstructed, and an alloc only while r.calmAlloc and in
// the default pools (a free only as completion finds it).
func (r *deviceReplay) calmTakes(ev *trace.Event) bool {
	return ev.Device == r.device && ev.Flags&trace.FlagReconstructed == 0 &&
		(ev.Kind != trace.KindAlloc || r.calmAlloc && ev.Pool.IsDefault())
}

// completion returns the free_completed right behind evs[i] if that is
// a free_requested it completes (a synchronous free), else nil.
func completion(evs []trace.Event, i int) *trace.Event {
	ev := &evs[i]
	if ev.Kind != trace.KindFreeRequested || i+1 >= len(evs) {
		return nil
	}
	if next := &evs[i+1]; next.Kind == trace.KindFreeCompleted && next.Addr == ev.Addr && next.Device == ev.Device {
		return next
	}
	return nil
}

// bare reports whether alloc and freePair would do nothing for r but
// replay the request, number its block and, annotating, write its size:
// mayBare, no capture's prologue being followed (called), and no
// recorded segment planned or followed. Only step and alloc change any of
// it (alloc ends the following of a segment that step saw), so it holds
// for the rest of a calm run once it does.
func (r *deviceReplay) bare() bool {
	return !r.called.valid &&
		len(r.followSegs) == 0 && (r.sim == nil || r.sim.Plans() == 0 && !r.following)
}

// bareRun is calmReqs while r is bare: bareAnnotated while r annotates,
// bareReqs from where it does not (or no longer: the model left the
// recording).
func (r *deviceReplay) bareRun(evs []trace.Event, i, end int) (int, error) {
	if r.annotate {
		var err error
		if i, err = r.bareAnnotated(evs, i, end); err != nil || r.annotate {
			return i, err
		}
	}
	return r.bareReqs(evs, i, end)
}

// bareAnnotated is bareReqs that also annotates (Options.Annotate): it
// writes the model's block size into each alloc it puts at its recorded
// address and into both events of each free, as alloc and freePair do.
// It returns after the event where the model left the recording.
func (r *deviceReplay) bareAnnotated(evs []trace.Event, i, end int) (int, error) {
	start := i
	for ; i < end; i++ {
		ev := &evs[i]
		if !r.calmTakes(ev) {
			break
		}
		if ev.Kind == trace.KindAlloc {
			addr, h, err := r.a.MallocHandle(ev.Size, ev.Stream)
			switch {
			case err != nil || !r.live.putNumbered(ev.Addr, ev.Ref, addr, h):
				err = r.allocRest(ev, addr, h, err)
			case addr != ev.Addr || h == 0:
				r.placed(ev, addr, h)
			default:
				ev.BlockSize = r.a.MallocSize(h)
				continue
			}
			if err != nil || !r.annotate {
				r.res.Events += int64(i + 1 - start)
				r.annotatedBare += int64(i + 1 - start)
				if err != nil {
					return i, eventError(ev, err)
				}
				return i + 1, nil
			}
			continue
		}
		next := completion(evs, i)
		if next == nil {
			break
		}
		i++
		// r.live.take, its numbered case inlined.
		b, ok := r.live.takeNumbered(ev.Addr, ev.Ref)
		if !ok {
			if b, ok = r.live.byAddr.Take(ev.Addr); !ok {
				continue
			}
		}
		if size, ok := r.a.FreeAllocated(b.addr, b.h); ok {
			ev.BlockSize, next.BlockSize = size, size
			continue
		}
		size, _ := r.a.HandleSize(b.addr, b.h)
		ev.BlockSize, next.BlockSize = size, size
		if err := r.a.FreeHandle(b.addr, b.h); err != nil {
			r.res.Events += int64(i + 1 - start)
			r.annotatedBare += int64(i + 1 - start)
			return i, eventError(next, err)
		}
	}
	r.res.Events += int64(i - start)
	r.annotatedBare += int64(i - start)
	return i, nil
}

// bareReqs is calmReqs while r is bare: alloc and freePair written out
// without what bare rules out, the events counted once at the end.
func (r *deviceReplay) bareReqs(evs []trace.Event, i, end int) (int, error) {
	start := i
	for ; i < end; i++ {
		ev := &evs[i]
		if !r.calmTakes(ev) {
			break
		}
		if ev.Kind == trace.KindAlloc {
			addr, h, err := r.a.MallocHandle(ev.Size, ev.Stream)
			if err != nil || !r.live.putNumbered(ev.Addr, ev.Ref, addr, h) {
				if err = r.allocRest(ev, addr, h, err); err != nil {
					r.res.Events += int64(i + 1 - start)
					return i, eventError(ev, err)
				}
			}
			continue
		}
		next := completion(evs, i)
		if next == nil {
			break
		}
		i++
		// r.live.take, its numbered case inlined.
		var b blockRef
		if s := r.live.slot(ev.Addr, ev.Ref); s != nil {
			s.used = false
			b = s.ref()
		} else {
			var ok bool
			if b, ok = r.live.byAddr.Take(ev.Addr); !ok {
				continue
			}
		}
		if err := r.a.FreeHandle(b.addr, b.h); err != nil {
			r.res.Events += int64(i + 1 - start)
			return i, eventError(next, err)
		}
	}
	r.res.Events += int64(i - start)
	return i, nil
}
