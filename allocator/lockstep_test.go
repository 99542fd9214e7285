package allocator

import (
	"fmt"
	"slices"
	"testing"
)

// lockstep drives one or more allocators through the same operations,
// decoded from bytes, and checks after every step that they return the
// same values and errors, emit the same events, keep the same statistics
// and layout, and hold their invariants.
type lockstep struct {
	t     testing.TB
	as    []*Allocator
	evs   [][]Event // each allocator's events of the current step
	live  []uint64  // allocated blocks
	liveH []Handle
	pend  []uint64 // blocks freed while other streams used them
	pendH []Handle
	capt  []PoolID // open captures, innermost last
	desc  string
	log   bool    // keep allocator 0's events in all
	all   []Event // allocator 0's events, if log
}

func newLockstep(t testing.TB, as ...*Allocator) *lockstep {
	l := &lockstep{t: t, as: as, evs: make([][]Event, len(as))}
	for i := range as {
		l.observe(i)
	}
	return l
}

// observe makes allocator i report its events to l.
func (l *lockstep) observe(i int) {
	l.as[i].SetObserver(ObserverFunc(func(e *Event) { l.evs[i] = append(l.evs[i], *e) }))
}

// lockPools are the private pools the operations capture into.
var lockPools = [2]PoolID{{A: 1, B: 1}, {A: 2, B: 7}}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// each calls f on every allocator and fails unless all return the same.
func (l *lockstep) each(step int, f func(a *Allocator) string) string {
	first := ""
	for i, a := range l.as {
		got := f(a)
		if i == 0 {
			first = got
		} else if got != first {
			l.t.Fatalf("step %d (%s): allocator 0 gave %q, allocator %d %q", step, l.desc, first, i, got)
		}
	}
	return first
}

// run applies the operations of data, 4 bytes each, at most max of them.
func (l *lockstep) run(data []byte, max int) {
	for step := 0; len(data) >= 4 && step < max; step++ {
		l.step(step, data[:4])
		data = data[4:]
	}
}

func (l *lockstep) step(step int, op []byte) {
	code, b1, n := op[0]%16, op[1], int(op[2])<<8|int(op[3])
	stream := uint64(b1>>6%3) << 8
	size := func() int64 {
		switch b1 % 4 {
		case 0:
			return int64(n) + 1
		case 1:
			return int64(n)*16 + 1
		case 2:
			return int64(n) * 256
		}
		return int64(n) * 2048
	}
	pick := func(addrs []uint64) int { return n % len(addrs) }
	switch {
	case code <= 5:
		sz := size()
		if code == 5 {
			sz = int64(n) << 16 // up to 4 GiB: segments of every kind, and OOMs
		}
		l.desc = fmt.Sprintf("malloc(%d, %d)", sz, stream)
		var addr uint64
		var h Handle
		var ok bool
		l.each(step, func(a *Allocator) string {
			var err error
			addr, h, err = a.MallocHandle(sz, stream)
			ok = err == nil
			if err != nil && !IsOOM(err) {
				l.t.Fatalf("step %d (%s): %v", step, l.desc, err)
			}
			return fmt.Sprint(addr, h, errText(err))
		})
		if ok && sz > 0 {
			l.live, l.liveH = append(l.live, addr), append(l.liveH, h)
		}
	case code <= 8:
		if len(l.live) == 0 {
			return
		}
		i := pick(l.live)
		addr, h := l.live[i], l.liveH[i]
		l.desc = fmt.Sprintf("free(%#x)", addr)
		l.each(step, func(a *Allocator) string {
			if b1&1 != 0 {
				return errText(a.FreeHandle(addr, h))
			}
			return errText(a.Free(addr))
		})
		l.live, l.liveH = slices.Delete(l.live, i, i+1), slices.Delete(l.liveH, i, i+1)
	case code == 9:
		// record_stream, and the free that leaves the block pending (b1 bit
		// 1); without it the block keeps its uses while allocated.
		if len(l.live) == 0 {
			return
		}
		i := pick(l.live)
		addr, h := l.live[i], l.liveH[i]
		other := uint64(b1>>2%4)<<8 + 1
		l.desc = fmt.Sprintf("record_stream(%#x, %d)", addr, other)
		l.each(step, func(a *Allocator) string {
			if b1&1 != 0 {
				return errText(a.RecordStreamHandle(addr, h, other))
			}
			return errText(a.RecordStream(addr, other))
		})
		if b1&2 == 0 {
			return
		}
		l.desc += "+free"
		l.each(step, func(a *Allocator) string {
			return errText(a.FreeHandle(addr, h)) + fmt.Sprint(a.Pending(addr))
		})
		if l.as[0].Pending(addr) {
			l.pend, l.pendH = append(l.pend, addr), append(l.pendH, h)
		}
		l.live, l.liveH = slices.Delete(l.live, i, i+1), slices.Delete(l.liveH, i, i+1)
	case code == 10:
		l.prunePending(step)
		if len(l.pend) == 0 {
			return
		}
		i := pick(l.pend)
		addr, h := l.pend[i], l.pendH[i]
		l.desc = fmt.Sprintf("complete(%#x)", addr)
		l.each(step, func(a *Allocator) string {
			switch b1 % 4 {
			case 0:
				return errText(a.CompleteFree(addr))
			case 1:
				return errText(a.CompleteFreeHandle(addr, h))
			case 2:
				return errText(a.CompleteLate(addr, h)) // freed within the next malloc
			}
			a.MarkEventsDone(addr) // freed by the next malloc's process_events
			return ""
		})
		l.pend, l.pendH = slices.Delete(l.pend, i, i+1), slices.Delete(l.pendH, i, i+1)
	case code == 11:
		if b1&1 != 0 && len(l.capt) > 0 {
			id := l.capt[len(l.capt)-1]
			l.capt = l.capt[:len(l.capt)-1]
			l.desc = fmt.Sprintf("end capture %v", id)
			l.each(step, func(a *Allocator) string {
				a.EndAllocateToPool(id)
				if b1&2 != 0 {
					a.ReleasePool(id)
				}
				return ""
			})
			return
		}
		id := lockPools[b1>>1%2]
		l.capt = append(l.capt, id)
		l.desc = fmt.Sprintf("begin capture %v", id)
		l.each(step, func(a *Allocator) string {
			var filter func(uint64) bool
			if b1&4 == 0 {
				filter = func(s uint64) bool { return s == 0 }
			}
			a.BeginAllocateToPool(id, filter)
			return ""
		})
	case code == 12:
		l.desc = "empty_cache"
		l.each(step, func(a *Allocator) string {
			if b1&1 != 0 {
				return errText(a.EmptyPoolCache(lockPools[b1>>1%2]))
			}
			return errText(a.EmptyCache())
		})
	case code == 13:
		// No lower than what is reserved: the invariants hold reserved
		// memory to the limit.
		limit := int64(0)
		if b1&1 != 0 {
			limit = max(int64(n%1024+64)*mib, l.as[0].Stats().ReservedBytes[0].Current)
		}
		l.desc = fmt.Sprintf("limit %d", limit)
		l.each(step, func(a *Allocator) string { a.SetMemoryLimit(limit); return "" })
	case code == 14:
		l.desc = "process_events, reset_peak"
		l.each(step, func(a *Allocator) string {
			if b1&1 != 0 {
				a.ResetPeak()
			} else {
				a.ProcessEvents()
			}
			return ""
		})
	default:
		// The questions a replay asks, which must change nothing.
		sz := size()
		l.desc = fmt.Sprintf("would_reclaim(%d), block_size", sz)
		l.each(step, func(a *Allocator) string {
			out := fmt.Sprint(a.WouldReclaim(sz, stream), a.FreeCached(), a.MemoryLimit())
			if len(l.live) > 0 {
				bs, ok := a.BlockSize(l.live[pick(l.live)])
				out += fmt.Sprint(bs, ok)
			}
			return out
		})
	}
	l.check(step)
}

// prunePending drops the blocks no longer pending (a flush or
// process_events freed them).
func (l *lockstep) prunePending(step int) {
	out, outH := l.pend[:0], l.pendH[:0]
	for i, addr := range l.pend {
		if l.each(step, func(a *Allocator) string { return fmt.Sprint(a.PendingHandle(addr, l.pendH[i])) }) == "true" {
			out, outH = append(out, addr), append(outH, l.pendH[i])
		}
	}
	l.pend, l.pendH = out, outH
}

// check compares the allocators' events, statistics and layouts, and their
// invariants, after step.
func (l *lockstep) check(step int) {
	for i, a := range l.as {
		if err := a.CheckInvariants(); err != nil {
			l.t.Fatalf("allocator %d after step %d (%s): %v", i, step, l.desc, err)
		}
		if i == 0 {
			continue
		}
		if !slices.Equal(l.evs[0], l.evs[i]) {
			l.t.Fatalf("step %d (%s): events differ:\n%v\n%v", step, l.desc, l.evs[0], l.evs[i])
		}
		if s0, s := l.as[0].Stats(), a.Stats(); s0 != s {
			l.t.Fatalf("step %d (%s): stats differ:\n%+v\n%+v", step, l.desc, s0, s)
		}
		if g0, g := l.as[0].Segments(), a.Segments(); !slices.EqualFunc(g0, g, sameSegment) {
			l.t.Fatalf("step %d (%s): segments differ:\n%+v\n%+v", step, l.desc, g0, g)
		}
	}
	if l.log {
		l.all = append(l.all, l.evs[0]...)
	}
	for i := range l.evs {
		l.evs[i] = l.evs[i][:0]
	}
}

func sameSegment(x, y SegmentInfo) bool {
	return x.Addr == y.Addr && x.Size == y.Size && x.Stream == y.Stream && x.Pool == y.Pool &&
		x.Small == y.Small && x.Expandable == y.Expandable && slices.Equal(x.Blocks, y.Blocks)
}
