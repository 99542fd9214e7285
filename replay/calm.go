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
	for ; i < end; i++ {
		ev := &evs[i]
		if ev.Device != r.device || ev.Flags&trace.FlagReconstructed != 0 {
			break
		}
		if ev.Kind == trace.KindAlloc {
			if !r.calmAlloc || !ev.Pool.IsDefault() {
				break
			}
			if err := r.alloc(ev); err != nil {
				return i, eventError(ev, err)
			}
			continue
		}
		if ev.Kind != trace.KindFreeRequested || i+1 >= len(evs) {
			break
		}
		next := &evs[i+1]
		if next.Kind != trace.KindFreeCompleted || next.Addr != ev.Addr || next.Device != ev.Device {
			break
		}
		i++
		if err := r.freePair(ev, next); err != nil {
			return i, eventError(next, err)
		}
	}
	return i, nil
}
