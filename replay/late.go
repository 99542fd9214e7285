package replay

import "github.com/tracer-dev/tracer/trace"

// Completions within a malloc (deviceReplay.late): a malloc that retries
// under a limit waits for every stream (release_cached_blocks) before it
// releases the cached segments, and PyTorch records those free_completed
// rows, then the segment releases, before the malloc's alloc. A replay
// that completed them where they lie would let the malloc's search find
// blocks PyTorch's did not; they complete within the malloc instead
// (allocator CompleteLate).

// lateBefore settles the held completions before ev, the device's next
// event: a release marks them as followed by one; an alloc or an OOM
// after a release takes them into its malloc; any other request, or a
// completion after a release, shows they were not a malloc's retry.
func (r *deviceReplay) lateBefore(ev *trace.Event) error {
	switch ev.Kind {
	case trace.KindSegmentFree, trace.KindSegmentUnmap:
		r.lateReleased = true
	case trace.KindSegmentAlloc, trace.KindSegmentMap:
	case trace.KindAlloc, trace.KindOOM:
		return r.lateToMalloc()
	case trace.KindFreeCompleted:
		if r.lateReleased {
			return r.flushLate()
		}
	default:
		return r.flushLate()
	}
	return nil
}

// flushLate completes the held completions (late) now, in order.
func (r *deviceReplay) flushLate() error {
	for _, b := range r.late {
		if err := r.a.CompleteFreeHandle(b.addr, b.h); err != nil {
			return err
		}
	}
	r.late, r.lateReleased = r.late[:0], false
	return nil
}

// lateToMalloc hands the held completions to the next malloc if releases
// followed them (allocator CompleteLate), and completes them now if not.
func (r *deviceReplay) lateToMalloc() error {
	if !r.lateReleased {
		return r.flushLate()
	}
	for _, b := range r.late {
		if err := r.a.CompleteLate(b.addr, b.h); err != nil {
			return err
		}
	}
	r.late, r.lateReleased = r.late[:0], false
	return nil
}
