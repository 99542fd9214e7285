package analysis

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// work is the summarizer's count of the entries its structures touched:
// the nodes of the block and segment trees (and every slot of a sweep of
// the blocks), the layout copy's nodes, and the segments copied into it.
func (s *Summarizer) work() int {
	return s.live.tree.visits + s.segs.tree.Visits + s.layout.Visits + s.layoutCopies
}

// TestAxesLogarithmic runs each axis at n = 2^13 and fails when the
// summarizer touched more than 24·log2(n) entries per event on average:
// what one O(n) pass per event (a recount, a sweep, a whole layout copy)
// exceeds many times over.
func TestAxesLogarithmic(t *testing.T) {
	const n = 1 << 13
	limit := 24 * bits.Len(n)
	for _, ax := range axes {
		evs := ax.gen(n)
		s := NewSummarizer(Options{})
		for i := range evs {
			ev := evs[i]
			ev.Seq = int64(i)
			s.Event(&ev)
		}
		s.Finalize()
		if per := s.work() / len(evs); per > limit {
			t.Errorf("%s at n=%d: %d entries touched per event, want at most %d", ax.name, n, per, limit)
		} else {
			t.Logf("%s: %d entries per event (limit %d)", ax.name, per, limit)
		}
	}
}

// TestBlockTreeLogarithmic: with 2^16 live blocks, a put, a free and a
// range query each touch O(log n) nodes (the put's insertion made by the
// query's sync).
func TestBlockTreeLogarithmic(t *testing.T) {
	const n = 1 << 16
	var bl blocks
	rng := rand.New(rand.NewPCG(7, 8))
	for _, i := range rng.Perm(n) {
		bl.put(block{addr: int64(i) * 1024, size: 512, inSeg: true}, blockInfo{}, 0)
	}
	bl.sync()
	limit := 6 * bits.Len(n)
	for i := range 1000 {
		a := int64(rng.IntN(n)) * 1024
		bl.tree.visits = 0
		bl.del(a)
		bl.put(block{addr: a, size: 512, inSeg: true}, blockInfo{}, 0)
		lo := int64(rng.IntN(n/2)) * 1024
		sum := bl.rangeSum(lo, lo+int64(n/4)*1024)
		f := gapFold{cursor: lo}
		bl.foldGaps(lo, lo+int64(n/4)*1024, &f)
		if bl.tree.visits > 4*limit {
			t.Fatalf("round %d: %d nodes touched, want at most %d", i, bl.tree.visits, 4*limit)
		}
		if sum.cnt != n/4 || sum.act != int64(n/4)*512 || f.best != 512 {
			t.Fatalf("round %d: sums %+v, largest gap %d; want %d blocks of 512 B, gap 512", i, sum, f.best, n/4)
		}
	}
}

// TestLargestFreeMatchesSweep drives random valid traces (segments and
// expandable ranges on two streams, blocks allocated and freed in them,
// ranges unmapped and mapped again) and checks, after every event, the
// incremental largest free block against the sweep, with and without the
// last reserved range counted as occupied, and the layout copy against a
// copy of every segment.
func TestLargestFreeMatchesSweep(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 99))
		s := NewSummarizer(Options{})
		g := &randTrace{rng: rng}
		for i := range 2000 {
			ev, extra := g.next()
			ev.Seq = int64(i)
			s.Event(&ev)
			for _, stream := range []uint64{0, 1} {
				var ext []extent
				if extra.end > extra.addr {
					ext = []extent{extra}
				}
				a1, s1 := s.largestFree(stream, ext)
				a2, s2 := s.largestFreeSweep(stream, ext)
				if a1 != a2 || s1 != s2 {
					t.Fatalf("seed %d event %d (%v %#x): largest free %d, %d on stream %d; the sweep says %d, %d",
						seed, i, ev.Kind, ev.Addr, a1, s1, stream, a2, s2)
				}
			}
			if i%97 == 0 {
				s.snapshotLayout()
				var want []SegmentLayout
				s.segs.tree.Each(func(_ int64, g *segment) { want = append(want, layoutOf(g)) })
				got := s.layoutSlice()
				if len(got) != len(want) {
					t.Fatalf("seed %d event %d: layout of %d segments, want %d", seed, i, len(got), len(want))
				}
				for k := range got {
					if got[k] != want[k] {
						t.Fatalf("seed %d event %d: layout %d is %+v, want %+v", seed, i, k, got[k], want[k])
					}
				}
			}
		}
	}
}

// randTrace makes a random valid trace: fixed segments of 8 slots and one
// expandable region of 2 MiB pages, each slot or page holding at most one
// block at its start.
type randTrace struct {
	rng     *rand.Rand
	segs    []randSeg
	next_   uint64
	pages   [64]int8 // expandable pages: 0 unmapped, 1 mapped, 2 mapped with a block
	pageBlk [64]int64
	pending []uint64
}

type randSeg struct {
	addr   uint64
	size   int64
	blocks [8]int64 // block size per slot, 0 none
	stream uint64
	live   bool
}

const randExp = 0x10000000000

func (r *randTrace) next() (trace.Event, extent) {
	for {
		switch r.rng.IntN(8) {
		case 0: // a new segment
			if r.next_ == 0 {
				r.next_ = 0x20000000000
			}
			size := int64(2+r.rng.IntN(7)) * MiB
			sg := randSeg{addr: r.next_, size: size, stream: uint64(r.rng.IntN(2)), live: true}
			r.next_ += uint64(size) + uint64(r.rng.IntN(2))*uint64(MiB)*2
			r.segs = append(r.segs, sg)
			ev := segAlloc(sg.addr, size)
			ev.Stream = sg.stream
			return ev, extent{int64(sg.addr), int64(sg.addr) + size}
		case 1, 2: // a block in a segment slot
			if len(r.segs) == 0 {
				continue
			}
			k := r.rng.IntN(len(r.segs))
			sg := &r.segs[k]
			j := r.rng.IntN(8)
			if !sg.live || sg.blocks[j] != 0 {
				continue
			}
			bs := int64(1+r.rng.IntN(int(sg.size/8/512))) * 512
			sg.blocks[j] = bs
			a := sg.addr + uint64(j)*uint64(sg.size/8)
			ev := alloc(a, bs, bs, 1)
			ev.Stream = sg.stream
			return ev, extent{}
		case 3: // free a segment block, or the segment when empty
			if len(r.segs) == 0 {
				continue
			}
			k := r.rng.IntN(len(r.segs))
			sg := &r.segs[k]
			if !sg.live {
				continue
			}
			for j := range sg.blocks {
				if sg.blocks[j] != 0 {
					a := sg.addr + uint64(j)*uint64(sg.size/8)
					sg.blocks[j] = 0
					r.pending = append(r.pending, a)
					return freeReq(a), extent{}
				}
			}
			sg.live = false
			return segFree(sg.addr, sg.size), extent{}
		case 4: // complete a pending free
			if len(r.pending) == 0 {
				continue
			}
			a := r.pending[0]
			r.pending = r.pending[1:]
			return freeDone(a), extent{}
		case 5: // map a page
			p := r.rng.IntN(len(r.pages))
			if r.pages[p] != 0 {
				continue
			}
			r.pages[p] = 1
			a := randExp + uint64(p)*uint64(2*MiB)
			return segMap(a, 2*MiB), extent{int64(a), int64(a) + 2*MiB}
		case 6: // a block on a mapped page, or its free
			p := r.rng.IntN(len(r.pages))
			a := randExp + uint64(p)*uint64(2*MiB)
			switch r.pages[p] {
			case 1:
				r.pages[p] = 2
				bs := int64(1+r.rng.IntN(4096)) * 512
				r.pageBlk[p] = bs
				return alloc(a, bs, bs, 2), extent{}
			case 2:
				r.pages[p] = 3
				return freeReq(a), extent{}
			case 3:
				r.pages[p] = 1
				return freeDone(a), extent{}
			}
		case 7: // unmap an empty page
			p := r.rng.IntN(len(r.pages))
			if r.pages[p] != 1 {
				continue
			}
			r.pages[p] = 0
			return segUnmap(randExp+uint64(p)*uint64(2*MiB), 2*MiB), extent{}
		}
	}
}
