package replay

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracer-dev/tracer/internal/cputime"
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// PartNumbers is BlockNumbers split among parts, each on a goroutine of
// its own, for a table of live addresses far past the caches, where each
// lookup is a cache miss and one core numbers slower than the model
// replays. An address belongs to one part (partOf), which keeps it in its
// own table and numbers it from its own numbers (part+1 plus multiples of
// the parts), so that the parts never give one number twice and the
// numbers in use stay below the parts times the most blocks live at once
// in any part. Start, on the caller's goroutine, lists each part's events
// of a chunk (one pass over it, which sets the Ref of the events of other
// kinds to 0); each part reads and numbers its own only. The numbers
// differ from BlockNumbers', but pair the events alike: the events of one
// block, from its alloc to its free_completed, share a number no other
// live block has, and a replay (Options.Numbered) gives the same results.
//
// Start hands a chunk to the parts and returns at once; Done waits until
// the oldest chunk Start handed out and Done did not wait for is numbered.
// With one part Start numbers on the caller's goroutine. One goroutine
// calls Reserve, Start and then Close, which stops the parts; Done may be
// called by another (the next stage of a pipeline), in step with Start.
type PartNumbers struct {
	parts []*numberPart
	wg    sync.WaitGroup
	// lists are the parts' lists of their events, per chunk in flight
	// (a ring of partsQueue): lists[c][p] is part p's of chunk c.
	lists    [][][]int32
	started  int          // chunks handed out; the next takes lists[started%partsQueue]
	inFlight atomic.Int32 // chunks handed out and not yet waited for
}

// numberPart is one part and its goroutine's channels: its events of a
// chunk in, one token out per chunk numbered.
type numberPart struct {
	nums BlockNumbers
	in   chan partWork
	done chan struct{}
	cpu  time.Duration // its goroutine's CPU time, when timed (after Close)
}

// partWork is a chunk and the indices of a part's events in it.
type partWork struct {
	evs []trace.Event
	own []int32
}

// partsQueue is the most chunks in flight (handed to Start and not yet
// waited for by Done).
const partsQueue = 16

// NewPartNumbers returns a numbering in parts parts (at least 1). timed
// has each part's goroutine keep its thread and measure its CPU time
// (PartCPU).
func NewPartNumbers(parts int, timed bool) *PartNumbers {
	n := &PartNumbers{}
	parts = max(parts, 1)
	for p := range parts {
		x := &numberPart{nums: BlockNumbers{part: int32(p), parts: int32(parts)}}
		n.parts = append(n.parts, x)
	}
	if parts == 1 {
		return n
	}
	n.lists = make([][][]int32, partsQueue)
	for c := range n.lists {
		n.lists[c] = make([][]int32, parts)
	}
	for _, x := range n.parts {
		x.in, x.done = make(chan partWork, partsQueue), make(chan struct{}, partsQueue)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if timed {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				start := cputime.Thread()
				defer func() { x.cpu = cputime.Thread() - start }()
			}
			for w := range x.in {
				x.nums.numberOwn(w.evs, w.own)
				x.done <- struct{}{}
			}
		}()
	}
	return n
}

// NumberParts is how many parts PartNumbers takes on procs cores: one
// below 8 (the parts' own reads of every chunk cost more CPU than they
// save where the cores are few and busy), then one per 4 cores, at most 4.
func NumberParts(procs int) int {
	if procs < 8 {
		return 1
	}
	return min(4, procs/4)
}

// Parts returns the number of parts.
func (n *PartNumbers) Parts() int { return len(n.parts) }

// Reserve makes room in each part for its share of blocks live at once on
// device (BlockNumbers.Reserve), before the first Start: the parts' tables
// at once, on a goroutine each (the runtime clears reused memory on the
// goroutine that allocates it, a table of millions of blocks in tens of
// milliseconds).
func (n *PartNumbers) Reserve(device int32, blocks int) { n.ReserveOff(device, blocks, nil) }

// ReserveOff is Reserve with the parts' tables made in h, if not nil
// (BlockNumbers.ReserveOff: outside the Go heap), which must outlive the
// numbering: Close, then h.Release.
func (n *PartNumbers) ReserveOff(device int32, blocks int, h *grow.OffHeap) {
	share := n.share(blocks)
	var wg sync.WaitGroup
	for _, x := range n.parts[1:] {
		wg.Go(func() { x.nums.ReserveOff(device, share, h) })
	}
	n.parts[0].nums.ReserveOff(device, share, h)
	wg.Wait()
}

// Prefault faults in each part's table of device's live addresses, which
// Reserve made (BlockNumbers.Prefault), on a goroutine each; false where
// the system cannot.
func (n *PartNumbers) Prefault(device int32) bool {
	var ok atomic.Bool
	ok.Store(true)
	var wg sync.WaitGroup
	for _, x := range n.parts {
		wg.Go(func() {
			if !x.nums.Prefault(device) {
				ok.Store(false)
			}
		})
	}
	wg.Wait()
	return ok.Load()
}

// share is a part's share of blocks live at once, and its spread.
func (n *PartNumbers) share(blocks int) int {
	if k := len(n.parts); k > 1 {
		return blocks/k + blocks/(8*k) + 64
	}
	return blocks
}

// Refs is about the greatest number the parts give where blocks are live
// at once (Options.Refs): a part's numbers are its own plus multiples of
// the parts, so the greatest is the parts times the most live in one part.
func (n *PartNumbers) Refs(blocks int) int {
	return len(n.parts) * (n.share(blocks) + 1)
}

// Start numbers evs, which follow the chunks handed to Start before, or
// hands each part its events of them to be numbered; evs are theirs until
// Done. At most partsQueue chunks may be in flight.
func (n *PartNumbers) Start(evs []trace.Event) {
	if len(n.parts) == 1 {
		n.parts[0].nums.Number(evs)
		return
	}
	if n.inFlight.Add(1) > partsQueue {
		panic("replay: PartNumbers.Start with partsQueue chunks in flight")
	}
	lists := n.lists[n.started%partsQueue]
	n.started++
	for p := range lists {
		lists[p] = lists[p][:0]
	}
	parts := int32(len(n.parts))
	for i := range evs {
		ev := &evs[i]
		if !numbered(ev.Kind) {
			ev.Ref = 0
			continue
		}
		p := partOf(ev.Addr, parts)
		lists[p] = append(lists[p], int32(i))
	}
	for p, x := range n.parts {
		x.in <- partWork{evs: evs, own: lists[p]}
	}
}

// Done waits until every part has numbered the oldest chunk Start handed
// out that Done has not waited for.
func (n *PartNumbers) Done() {
	if len(n.parts) == 1 {
		return
	}
	for _, x := range n.parts {
		<-x.done
	}
	n.inFlight.Add(-1)
}

// Close stops the parts' goroutines once they have numbered what Start
// handed them, and waits for them.
func (n *PartNumbers) Close() {
	if len(n.parts) == 1 {
		return
	}
	for _, x := range n.parts {
		close(x.in)
	}
	n.wg.Wait()
}

// PartCPU returns each part's goroutine's CPU time, after Close, when
// timed (0 with one part: the caller's goroutine numbered).
func (n *PartNumbers) PartCPU() []time.Duration {
	cpu := make([]time.Duration, len(n.parts))
	for i, x := range n.parts {
		cpu[i] = x.cpu
	}
	return cpu
}
