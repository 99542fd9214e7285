package replay

import (
	"github.com/tracer-dev/tracer/internal/addrmap"
	"github.com/tracer-dev/tracer/trace"
)

// BlockNumbers sets the Ref of a stream's events (trace.Event.Ref), device
// by device: an alloc takes the number its address holds, if a block there
// has not been freed, or else a free number (the lowest-numbered most
// recently freed first, or a new one); a free_requested and a
// free_completed take the number of their address, and the free_completed
// gives it back. The numbers in use are the blocks live in the recording,
// so a replay's table of them is bounded by its live blocks, like an
// address map, and is read with an index instead of a hash lookup.
//
// It runs in a stage before the replay (the pipeline's numbering stage,
// the import's annotation reader), so that on two or more cores its
// address lookups overlap the model's work; on many, in parts
// (PartNumbers). Events
// of other kinds get 0, as do frees of addresses no alloc named. The zero
// BlockNumbers is ready to use; it is not safe for concurrent use.
type BlockNumbers struct {
	devs   []*deviceNumbers
	last   *deviceNumbers
	peeked uint64 // Number's peeks, kept so they are made
	looked int    // events looked up: with parts, the part's own
	// part of parts (PartNumbers; 0 of 0 alone): the addresses it numbers.
	part, parts int32
}

// deviceNumbers is one device's numbering (of one part's addresses, see
// PartNumbers).
type deviceNumbers struct {
	device int32
	at     addrmap.Map[int32] // live address → its number
	free   []int32            // numbers given back, reused last first
	next   int32              // the next number never given
	step   int32              // between the numbers given: the parts
}

// Number sets the Ref of evs, which follow the events numbered before.
func (n *BlockNumbers) Number(evs []trace.Event) {
	d := n.last
	peekAt := 0
	for i := 0; i < len(evs); i++ {
		if i >= peekAt && d != nil {
			// As the replay does (runner.batch): the next events' slots
			// in one loop, so that their cache misses overlap.
			peekAt = min(i+peekAhead, len(evs))
			n.peeked += peekAll(&d.at, evs[i:peekAt])
		}
		ev := &evs[i]
		if !numbered(ev.Kind) {
			ev.Ref = 0
			continue
		}
		if d == nil || d.device != ev.Device {
			d = n.device(ev.Device)
		}
		if next := completion(evs, i); next != nil {
			n.looked += 2
			d.numberPair(ev, next)
			i++
			continue
		}
		n.looked++
		d.number(ev)
	}
	n.last = d
}

// peekAll peeks at the slots of evs' addresses (addrmap.Map.Peek), but
// not a free_completed's: nearly every one completes the free_requested
// before it, whose lookup numbers both (numberPair). It is kept out of
// line: inlined in Number, its loop is one of spills and reloads.
//
//go:noinline
func peekAll(m *addrmap.Map[int32], evs []trace.Event) uint64 {
	var sum uint64
	for i := range evs {
		if evs[i].Kind != trace.KindFreeCompleted {
			sum += m.Peek(evs[i].Addr)
		}
	}
	return sum
}

// numberOwn is Number for a part (PartNumbers): it numbers the events of
// evs at the indices own, its alloc and free_* events, and no other.
func (n *BlockNumbers) numberOwn(evs []trace.Event, own []int32) {
	d := n.last
	peekAt := 0
	for k := 0; k < len(own); k++ {
		if k >= peekAt && d != nil {
			peekAt = min(k+peekAhead, len(own))
			for _, j := range own[k:peekAt] {
				n.peeked += d.at.Peek(evs[j].Addr)
			}
		}
		i := own[k]
		ev := &evs[i]
		if d == nil || d.device != ev.Device {
			d = n.device(ev.Device)
		}
		// The free_completed of a synchronous free has the same address,
		// so the same part: the next of own.
		if next := completion(evs, int(i)); next != nil && k+1 < len(own) && own[k+1] == i+1 {
			n.looked += 2
			d.numberPair(ev, next)
			k++
			continue
		}
		n.looked++
		d.number(ev)
	}
	n.last = d
}

// numbered says whether events of kind k carry a block's number.
func numbered(k trace.Kind) bool {
	return k == trace.KindAlloc || k == trace.KindFreeRequested || k == trace.KindFreeCompleted
}

// number sets the Ref of ev, an alloc or free_* event of d's device.
func (d *deviceNumbers) number(ev *trace.Event) {
	switch ev.Kind {
	case trace.KindAlloc:
		num, ok := d.at.Upsert(ev.Addr)
		if !ok {
			*num = d.take()
		}
		ev.Ref = *num
	case trace.KindFreeRequested:
		ev.Ref, _ = d.at.Get(ev.Addr)
	default:
		ev.Ref = 0
		if num, ok := d.at.Take(ev.Addr); ok {
			ev.Ref = num
			d.free = append(d.free, num)
		}
	}
}

// numberPair numbers a free_requested req and its free_completed done,
// right behind it (a synchronous free), as number does one after the
// other, with one lookup of their address.
func (d *deviceNumbers) numberPair(req, done *trace.Event) {
	num, ok := d.at.Take(req.Addr)
	req.Ref, done.Ref = num, num
	if ok {
		d.free = append(d.free, num)
	}
}

// partOf is the part of parts that numbers the blocks at addr: the top
// bits of a product other than addrmap's, so that a part's addresses
// spread over its whole table.
func partOf(addr uint64, parts int32) int32 {
	h := addr * 0xD1B54A32D192ED03
	return int32((h >> 32) * uint64(parts) >> 32)
}

// device returns device d's numbering, made on its first event: a part's
// numbers are part+1 plus multiples of parts, which no other part gives.
func (n *BlockNumbers) device(d int32) *deviceNumbers {
	for _, x := range n.devs {
		if x.device == d {
			return x
		}
	}
	x := &deviceNumbers{device: d, next: n.part + 1, step: max(n.parts, 1)}
	n.devs = append(n.devs, x)
	return x
}

// take returns a number not in use.
func (d *deviceNumbers) take() int32 {
	if k := len(d.free); k > 0 {
		num := d.free[k-1]
		d.free = d.free[:k-1]
		return num
	}
	d.next += d.step
	return d.next - d.step
}
