package torchsnap

import (
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tracer-dev/tracer/trace"
)

// parallelStartMin is the fewest events whose start state a device decoded
// in memory derives on several cores (parallelStart) rather than by undo.
var parallelStartMin = 1 << 16 // a variable for the tests

// parallelStart derives d's start state as Forward does, on several cores:
// Forward's result for a block address depends only on that address's
// events, so each of a power of two of workers follows the block events
// of its share of the addresses (split by a hash of the address), while
// the segment events, few, are undone alone at the end as Forward does.
// A first pass, also on all workers, sorts the indexes of d's events into
// the shares, each a range of the trace at a time, so that no worker
// reads the whole trace. ok is false where d's events are not in memory,
// are too few to be worth it, or hold more segment events than Forward
// keeps: then undo derives the state.
func (d *Device) parallelStart() (st *start, unseenFree, ok bool) {
	n := int(d.Len())
	procs := runtime.GOMAXPROCS(0)
	if d.sp != nil || n < parallelStartMin || procs < 2 || int64(n) > 1<<31-1 {
		return nil, false, false
	}
	// at returns event i: d.Events[i], or its record widened into tmp;
	// where the records are in a scratch file, the record of window w
	// (a range of them read by the caller, from index w.lo).
	at := func(i int, tmp *trace.Event, w *recWindow) *trace.Event {
		switch {
		case d.rf != nil:
			w.recs[int64(i)-w.lo].widen(tmp, int64(i), d.Index)
			return tmp
		case d.recs != nil:
			d.recs[i].widen(tmp, int64(i), d.Index)
			return tmp
		}
		return &d.Events[i]
	}
	shift := uint(bits.Len(uint(min(procs, 16))) - 1) // log2 of the shares
	k := 1 << shift
	// Pass 1: the events of range r of the trace, by share, and its segment events.
	type part struct {
		idx    [][]int32
		allocs []int // of each share
		segEvs []trace.Event
	}
	parts := make([]part, k)
	per := (n + k - 1) / k
	var wg sync.WaitGroup
	var failed atomic.Bool // a read of the scratch file
	for r := range parts {
		wg.Go(func() {
			p := &parts[r]
			p.idx, p.allocs = make([][]int32, k), make([]int, k)
			lo, hi := min(n, r*per), min(n, (r+1)*per)
			var tmp trace.Event
			for s := range p.idx {
				p.idx[s] = make([]int32, 0, (hi-lo)/k+(hi-lo)/(4*k)+16)
			}
			var w recWindow
			for i := lo; i < hi; i++ {
				if d.rf != nil && int64(i) >= w.lo+int64(len(w.recs)) {
					if !w.read(d, int64(i), int64(min(hi, i+ChunkSize))) {
						failed.Store(true)
						return
					}
				}
				// The kind and address alone: only a segment event is widened.
				var k trace.Kind
				var a uint64
				switch {
				case d.rf != nil:
					r := &w.recs[int64(i)-w.lo]
					k, a = r.Kind, r.Addr
				case d.recs != nil:
					k, a = d.recs[i].Kind, d.recs[i].Addr
				default:
					k, a = d.Events[i].Kind, d.Events[i].Addr
				}
				switch k {
				case trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted:
					s := share(a, shift)
					p.idx[s] = append(p.idx[s], int32(i))
					if k == trace.KindAlloc {
						p.allocs[s]++
					}
				case trace.KindSegmentAlloc, trace.KindSegmentFree, trace.KindSegmentMap, trace.KindSegmentUnmap:
					p.segEvs = append(p.segEvs, *at(i, &tmp, &w))
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return nil, false, false
	}
	var segEvs []trace.Event
	for r := range parts {
		segEvs = append(segEvs, parts[r].segEvs...)
		parts[r].segEvs = nil
		if len(segEvs) > maxSegEvents {
			return nil, false, false
		}
	}
	// Pass 2: each share's block events, in order, into a table sized
	// at once (reserveShare).
	fs := make([]Forward, k)
	for s := range fs {
		allocs := 0
		for r := range parts {
			allocs += parts[r].allocs[s]
		}
		wg.Go(func() { fs[s].reserveShare(allocs) })
	}
	wg.Wait()
	if d.rf != nil {
		// A range of the scratch file's records at a time, read once,
		// which the shares go through while the next range is read into
		// the other window: the reads, on one core, no longer wait for
		// the shares nor the shares for them.
		var ws [2]recWindow
		if !ws[0].read(d, 0, int64(min(n, per))) {
			return nil, false, false
		}
		for r := range parts {
			lo := min(n, r*per)
			w := &ws[r%2]
			if r+1 < len(parts) {
				next := &ws[(r+1)%2]
				wg.Go(func() {
					if !next.read(d, int64(min(n, (r+1)*per)), int64(min(n, (r+2)*per))) {
						failed.Store(true)
					}
				})
			}
			for s := range fs {
				wg.Go(func() {
					fs[s].followRecs(w.recs, lo, parts[r].idx[s])
					parts[r].idx[s] = nil
				})
			}
			wg.Wait()
			if failed.Load() {
				return nil, false, false
			}
		}
	} else {
		for s := range fs {
			wg.Go(func() {
				f := &fs[s]
				for r := range parts {
					if d.recs != nil {
						f.followRecs(d.recs, 0, parts[r].idx[s])
					} else {
						f.followEvents(d.Events, parts[r].idx[s])
					}
					parts[r].idx[s] = nil
				}
			})
		}
		wg.Wait()
	}
	st, unseenFree = mergeStart(d, fs, func(a uint64) int { return share(a, shift) }, segEvs)
	return st, unseenFree, true
}

// reserveShare sizes f's table of addresses for a share with allocs
// allocs, and faults it in: a complete history has at most an address an
// alloc, and a real program reuses addresses (the small program has 1.5
// allocs an address), so room for two thirds of them; a share that
// outgrows it doubles once. The table's pages are faulted in for writing
// at once, not a fault (and a copy of the zero page) for each as the
// probes reach it.
func (f *Forward) reserveShare(allocs int) {
	f.addrs.Reserve(allocs - allocs/3)
	f.addrs.Pages().Populate(0, math.MaxInt)
}

// recWindow is a range of a device's records read from its scratch file
// (Device.rf), from index lo.
type recWindow struct {
	lo   int64
	recs []srec
	buf  []srec
}

// read reads d's records [lo, hi) into w (its buffer grown as needed);
// false where the file could not be read.
func (w *recWindow) read(d *Device, lo, hi int64) bool {
	if int64(cap(w.buf)) < hi-lo {
		w.buf = make([]srec, hi-lo)
	}
	w.lo, w.recs = lo, w.buf[:hi-lo]
	return d.rf.readRecs(w.recs, d.rfLo+lo) == nil
}

// share is the share of block address a among 1<<shift. It mixes the
// address otherwise than addrmap's Fibonacci hashing, whose top bits pick
// a slot: were a share's addresses those whose top bits agree, they would
// crowd a fraction of each worker's table.
func share(a uint64, shift uint) int {
	a ^= a >> 33
	a *= 0xff51afd7ed558ccd
	a ^= a >> 33
	return int(a & (1<<shift - 1))
}
