// Package analysistest generates realistic synthetic allocator event streams
// for tests and benchmarks of analysis and plots, until recorded traces can
// be decoded in tests. Streams are deterministic for a seed.
package analysistest

import (
	"math/rand/v2"

	"github.com/tracer-dev/tracer/trace"
)

// Training emits a training-loop-like stream of at least n events through
// emit (the Event is reused: copy it to keep it) and returns the count. It
// follows the caching allocator's shape without modelling it exactly:
// 2 MiB segments for requests up to 1 MiB, 20 MiB segments up to 10 MiB and
// one segment per larger request; activations allocated in a forward pass
// and freed in reverse; temporaries freed at once; some frees on a second
// stream completed a few events later; occasional empty_cache; a rare OOM.
// The stream ends with everything freed, so it can be fed again from the
// start (with Seq and TimeUs shifted by the caller).
func Training(seed uint64, n int, emit func(*trace.Event)) int {
	g := &gen{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), emit: emit, nextAddr: 0x7f0000000000}
	g.t = 1_700_000_000_000_000
	g.sites = make([]site, 64)
	for i := range g.sites {
		g.sites[i] = g.newSite(i)
	}
	for g.seq < int64(n) {
		g.iteration()
	}
	g.drain()
	return int(g.seq)
}

type site struct {
	size   int64
	stack  trace.StackID
	temp   bool   // freed right after allocation (a temporary)
	stream uint64 // freeing stream side: nonzero means cross-stream (pending free)
}

type seg struct {
	addr, size, bump int64
	live             int
	pool             int // 0 small, 1 large, 2 huge
}

type blk struct {
	addr, size, req int64
	stack           trace.StackID
	seg             *seg
	cross           bool
}

type gen struct {
	r        *rand.Rand
	emit     func(*trace.Event)
	ev       trace.Event
	seq, t   int64
	nextAddr int64
	sites    []site
	segs     []*seg
	live     []blk
	pending  []blk // free_requested, free_completed not yet emitted
	iter     int
}

func (g *gen) newSite(i int) site {
	var size int64
	switch x := g.r.IntN(10); {
	case x < 6: // small activations and temporaries
		size = 1 + g.r.Int64N(1<<20)
	case x < 9:
		size = 1<<20 + g.r.Int64N(9<<20)
	default:
		size = 10<<20 + g.r.Int64N(200<<20)
	}
	return site{size: size, stack: trace.StackID(i), temp: g.r.IntN(3) == 0, stream: uint64(g.r.IntN(8) / 7)}
}

func (g *gen) put(k trace.Kind, addr, size, block int64, stack trace.StackID) {
	g.t += 1 + g.r.Int64N(40)
	g.ev = trace.Event{Seq: g.seq, TimeUs: g.t, Kind: k, Addr: uint64(addr), Size: size,
		Stack: stack, BlockSize: block}
	g.emit(&g.ev)
	g.seq++
}

func (g *gen) iteration() {
	g.iter++
	// Forward: activations stay, temporaries go at once; sizes jitter a
	// little per iteration so the cache fragments.
	mark := len(g.live)
	steps := 20 + g.r.IntN(60)
	for i := 0; i < steps; i++ {
		s := g.sites[g.r.IntN(len(g.sites))]
		req := s.size + g.r.Int64N(s.size/8+1)
		b := g.malloc(req, s.stack)
		b.cross = s.stream != 0
		if s.temp {
			g.free(b)
		} else {
			g.live = append(g.live, b)
		}
		g.flushPending(false)
	}
	// Backward: free this iteration's activations in reverse.
	for len(g.live) > mark {
		b := g.live[len(g.live)-1]
		g.live = g.live[:len(g.live)-1]
		g.free(b)
		g.flushPending(false)
	}
	g.flushPending(true)
	// A few long-lived tensors (parameters, optimizer state) now and then.
	if g.iter%25 == 1 && len(g.live) < 40 {
		g.live = append(g.live, g.malloc(1<<20+g.r.Int64N(8<<20), trace.StackID(len(g.sites))))
	}
	if g.iter%60 == 0 {
		g.emptyCache()
	}
	if g.iter%997 == 0 {
		g.put(trace.KindOOM, 1<<30, 64<<30, 0, trace.StackID(len(g.sites)+1))
	}
}

func round512(n int64) int64 { return max((n+511)&^511, 512) }

func (g *gen) malloc(req int64, stack trace.StackID) blk {
	size := round512(req)
	pool, segSize := 0, int64(2<<20)
	switch {
	case size > 10<<20:
		pool, segSize = 2, (size+(2<<20)-1)&^(2<<20-1)
	case size > 1<<20:
		pool, segSize = 1, 20<<20
	}
	var sg *seg
	for _, c := range g.segs {
		if c.pool == pool && c.size-c.bump >= size {
			sg = c
			break
		}
	}
	if sg == nil {
		sg = &seg{addr: g.nextAddr, size: segSize, pool: pool}
		g.nextAddr += segSize + 2<<20
		g.segs = append(g.segs, sg)
		g.put(trace.KindSegmentAlloc, sg.addr, sg.size, 0, stack)
	}
	b := blk{addr: sg.addr + sg.bump, size: size, req: req, stack: stack, seg: sg}
	sg.bump += size
	sg.live++
	g.put(trace.KindAlloc, b.addr, req, size, stack)
	return b
}

func (g *gen) free(b blk) {
	g.put(trace.KindFreeRequested, b.addr, b.req, b.size, b.stack)
	if b.cross {
		g.pending = append(g.pending, b)
		return
	}
	g.complete(b)
}

func (g *gen) complete(b blk) {
	g.put(trace.KindFreeCompleted, b.addr, b.req, b.size, b.stack)
	b.seg.live--
	if b.seg.live == 0 {
		b.seg.bump = 0 // the segment's blocks merged back into one free block
	}
}

// flushPending completes cross-stream frees: all of them, or with some
// probability the oldest, as event queries would.
func (g *gen) flushPending(all bool) {
	for len(g.pending) > 0 && (all || g.r.IntN(4) == 0) {
		b := g.pending[0]
		g.pending = g.pending[1:]
		g.complete(b)
	}
}

func (g *gen) emptyCache() {
	kept := g.segs[:0]
	for _, s := range g.segs {
		if s.live == 0 {
			g.put(trace.KindSegmentFree, s.addr, s.size, 0, trace.NoStack)
			continue
		}
		kept = append(kept, s)
	}
	g.segs = kept
}

func (g *gen) drain() {
	for len(g.live) > 0 {
		b := g.live[len(g.live)-1]
		g.live = g.live[:len(g.live)-1]
		g.free(b)
	}
	g.flushPending(true)
	g.emptyCache()
}
