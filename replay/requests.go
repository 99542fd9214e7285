package replay

import (
	"fmt"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// Request is one caller operation of a trace's request stream, reduced to
// what a caching allocator is asked: allocate Size bytes on Stream into Slot,
// or free the block in Slot. It is the common input of Drive and of the
// PyTorch yardstick (testdata/bench/torch_replay.py), which replays the same
// stream through c10's raw_alloc/raw_delete.
type Request struct {
	Free   bool
	Slot   int32
	Size   int64
	Stream uint64
}

// Requests extracts the request stream of one device of src: each recorded
// alloc, and each free_requested of a block allocated within the trace.
// slots is the number of distinct slots used.
func Requests(src Source, device int32) (reqs []Request, slots int, err error) {
	slotOf := map[uint64]int32{}
	var free []int32
	for src.Next() {
		ev := src.Event()
		if ev.Device != device || ev.Flags&trace.FlagReconstructed != 0 {
			continue
		}
		switch ev.Kind {
		case trace.KindAlloc:
			var s int32
			if n := len(free); n > 0 {
				s, free = free[n-1], free[:n-1]
			} else {
				s = int32(slots)
				slots++
			}
			slotOf[ev.Addr] = s
			reqs = append(reqs, Request{Slot: s, Size: max(ev.Size, 1), Stream: ev.Stream})
		case trace.KindFreeRequested:
			if s, ok := slotOf[ev.Addr]; ok {
				delete(slotOf, ev.Addr)
				reqs = append(reqs, Request{Free: true, Slot: s})
				free = append(free, s)
			}
		}
	}
	return reqs, slots, src.Err()
}

// Drive serves reqs on a, then frees whatever is still allocated, and
// returns the time spent serving reqs. Called twice on one allocator, the
// second call measures the warm cost: the cache then holds the segments, as
// in a training loop's steady state. It frees each block by the Handle its
// malloc returned, as the replay does, so that the allocator keeps no
// index of its blocks by address.
func Drive(a *allocator.Allocator, reqs []Request, slots int) (time.Duration, error) {
	type held struct {
		addr uint64
		h    allocator.Handle
	}
	live := make([]held, slots)
	start := time.Now()
	for i := range reqs {
		r := &reqs[i]
		if r.Free {
			if b := live[r.Slot]; b.addr != 0 {
				if err := a.FreeHandle(b.addr, b.h); err != nil {
					return 0, fmt.Errorf("replay: request %d: free: %w", i, err)
				}
				live[r.Slot].addr = 0
			}
			continue
		}
		p, h, err := a.MallocHandle(r.Size, r.Stream)
		if err != nil {
			return 0, fmt.Errorf("replay: request %d: malloc %d bytes: %w", i, r.Size, err)
		}
		live[r.Slot] = held{p, h}
	}
	elapsed := time.Since(start)
	for _, b := range live {
		if b.addr != 0 {
			if err := a.FreeHandle(b.addr, b.h); err != nil {
				return elapsed, err
			}
		}
	}
	return elapsed, nil
}
