package replay

import (
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// CUDA graph captures in a replay.
//
// torch.cuda.graph's __enter__ calls torch.cuda.empty_cache() before
// capture_begin, and each such call counts in num_sync_all_streams, but a
// trace shows a capture only by its allocations into the graph's private
// pool. A replay takes an episode of a graph pool (a run of allocations
// into it, which an allocation into another pool ends) for a capture or,
// with torch.compile(mode="reduce-overhead"), for one of CUDA graph trees'
// runs in the pool, which warm a function up eagerly once and then record
// it:
//
//   - the pool's first episode is a capture, or a tree's first warmup,
//     which follows the tree's own empty capture that makes the pool; its
//     call is performed when it starts (beginPool);
//   - a later episode is a warmup, which calls nothing, when a later
//     episode of the pool repeats it: the recording of the same function,
//     whose allocations are those of the warmup after any copies of its
//     inputs (repeats). Any other later episode is a capture (a graph
//     captured into a pool shared with an earlier one, or a tree's
//     recording), whose call is counted when the replay ends, as only then
//     is it known.
//
// A later capture's call is counted, not performed: the calls before it
// (the program's own, the first capture's) have released what it would
// have, in the programs seen. A tree whose run ended before it recorded a
// function it warmed up, or that ran a function once, shows its last
// warmups as captures: a trace cannot tell them apart.
type captures struct {
	open   allocator.PoolID // the graph pool of the episode under way; (0, 0): none
	cur    episode          // it: its allocations so far are sizes[cur.off:]
	stream uint64           // their stream
	// eps are the episodes ended, in order, and last each pool's latest
	// of them, whose prev links its pool's earlier ones. Their sizes lie
	// in one slice, and neither it nor eps holds a pointer: no object an
	// episode for the collector to scan.
	sizes  []int64
	eps    []episode
	last   map[allocator.PoolID]int32
	graphs map[allocator.PoolID]bool // of the pools numbered (0, n): graph pools
}

// episode is one run of allocations into a graph pool: their sizes
// (sizes[off:off+n]), whether it was its pool's first (beginPool performed
// its call), and its pool's episode before it (-1: none).
type episode struct {
	off   int
	n     int32
	prev  int32
	first bool
}

// isGraphPool reports whether p is a CUDA graph's pool, first met on
// stream: one capture_begin makes, numbered (n, 0), or one of
// torch.cuda.graph_pool_handle(), numbered (0, n) as a torch.cuda.MemPool
// is (CUDA graph trees' pool is one), which a capture uses on a stream
// other than the legacy default one.
func isGraphPool(p allocator.PoolID, stream uint64) bool {
	return p.A != 0 || p.B != 0 && stream != 0
}

// allocIn notes the allocation ev into pool p; first says it began p's
// first episode. A capture allocates in one pool: when p's first episode
// begins right after the first episode of a pool the inference invented,
// on the same stream, the invented pool was p, which the inference could
// not know at the capture's first allocation (a pool the dump names,
// first met at a later one). allocIn then returns the invented pool.
func (c *captures) allocIn(p allocator.PoolID, ev *trace.Event, first bool) (allocator.PoolID, bool) {
	if p == c.open && p.IsDefault() {
		return allocator.PoolID{}, false // the default pools, as nearly always
	}
	var alias allocator.PoolID
	if p != c.open {
		prev, prevFirst, prevStream := c.open, c.cur.first, c.stream
		c.close()
		if !c.graph(p, ev.Stream, first) {
			return allocator.PoolID{}, false
		}
		if first && prevFirst && prev.A&inventedPool != 0 && p.A&inventedPool == 0 && prevStream == ev.Stream {
			alias = prev
		}
		c.open, c.cur, c.stream = p, episode{off: len(c.sizes), first: first}, ev.Stream
	}
	c.sizes = append(c.sizes, ev.Size)
	return alias, alias != (allocator.PoolID{})
}

// graph reports whether p is a graph pool (isGraphPool), first met on
// stream if first.
func (c *captures) graph(p allocator.PoolID, stream uint64, first bool) bool {
	if p.IsDefault() || p.A != 0 {
		return p.A != 0
	}
	if first {
		if c.graphs == nil {
			c.graphs = map[allocator.PoolID]bool{}
		}
		c.graphs[p] = isGraphPool(p, stream)
	}
	return c.graphs[p]
}

// capturing reports whether a graph pool's episode is under way.
func (c *captures) capturing() bool { return c.open != (allocator.PoolID{}) }

// close ends the episode under way, if any.
func (c *captures) close() {
	if c.open == (allocator.PoolID{}) {
		return
	}
	if c.last == nil {
		c.last = map[allocator.PoolID]int32{}
	}
	e := c.cur
	e.n, e.prev = int32(len(c.sizes)-e.off), -1
	if k, ok := c.last[c.open]; ok {
		e.prev = k
	}
	c.last[c.open] = int32(len(c.eps))
	c.eps = append(c.eps, e)
	c.open, c.cur = allocator.PoolID{}, episode{}
}

// later returns how many later episodes were captures (see above). An
// episode still under way when the trace ends (a run that died of an OOM
// in a capture or a warm-up) is not counted: whether a recording would
// have repeated it, the trace cannot tell.
func (c *captures) later() int {
	c.open, c.cur = allocator.PoolID{}, episode{}
	n := 0
	var later suffixes
	for _, k := range c.last {
		// From the last episode back, each looked up among the later ones.
		later.reset()
		for ; k >= 0; k = c.eps[k].prev {
			e := &c.eps[k]
			w := c.sizes[e.off : e.off+int(e.n)]
			if !e.first && !later.repeat(w) {
				n++
			}
			later.add(w)
		}
	}
	return n
}

// suffixes holds episodes by their sizes from the last back (a trie: an
// edge per node and size), so that whether one of them repeats an episode
// w costs w's length, whatever their number. An episode r repeats w when
// r's allocations, less its leading ones that copy the recording's inputs
// (none when every input is static: parameters, or outputs of the tree's
// other graphs), are the last ones of w (whose first run may allocate
// more before, such as the RNG state), at least two and at least half of
// w's: when r and w end in the same m sizes, m = max(2, ⌈len(w)/2⌉).
type suffixes struct {
	next  map[suffixEdge]int32
	nodes int32 // made so far; 0 is the root
}

type suffixEdge struct {
	node int32
	size int64
}

func (x *suffixes) reset() {
	clear(x.next)
	x.nodes = 1
}

// add adds the episode r; one of fewer than two allocations repeats
// nothing.
func (x *suffixes) add(r []int64) {
	if len(r) < 2 {
		return
	}
	if x.next == nil {
		x.next = map[suffixEdge]int32{}
		x.nodes = 1
	}
	node := int32(0)
	for i := len(r) - 1; i >= 0; i-- {
		if countVisits {
			suffixVisits.Add(1)
		}
		e := suffixEdge{node, r[i]}
		child, ok := x.next[e]
		if !ok {
			child = x.nodes
			x.nodes++
			x.next[e] = child
		}
		node = child
	}
}

// repeat reports whether an episode added repeats w.
func (x *suffixes) repeat(w []int64) bool {
	if len(w) < 2 {
		return false
	}
	m := max(2, (len(w)+1)/2)
	node := int32(0)
	for i := len(w) - 1; i >= len(w)-m; i-- {
		if countVisits {
			suffixVisits.Add(1)
		}
		child, ok := x.next[suffixEdge{node, w[i]}]
		if !ok {
			return false
		}
		node = child
	}
	return true
}

// sinceCall follows the requests after an empty_cache call, to tell
// whether a capture's first allocation comes right after one, which is
// then the call torch.cuda.graph made: only allocations on one stream
// came between, those capture_begin makes on the capture stream before it
// routes the stream to the pool (prologue).
type sinceCall struct {
	valid, streamSet bool
	stream           uint64
	n                int  // allocations since the call
	small            bool // each of them of prologueBytes
}

// prologueBytes is the size of the two tensors (an int64 each, the seed
// and the offset of the default CUDA generator for graphs) that
// capture_begin allocates at a process's first capture, on the capture
// stream, before it routes the stream to the graph's pool: they are the
// default pools'.
const prologueBytes = 8

// call notes an empty_cache call.
func (c *sinceCall) call() { *c = sinceCall{valid: true, small: true} }

// request notes the request ev.
func (c *sinceCall) request(ev *trace.Event) {
	if !c.valid {
		return
	}
	if ev.Kind != trace.KindAlloc || c.streamSet && c.stream != ev.Stream {
		c.valid = false
		return
	}
	c.stream, c.streamSet = ev.Stream, true
	c.n++
	c.small = c.small && ev.Size == prologueBytes
}

// before reports whether the call came right before the allocation ev.
func (c *sinceCall) before(ev *trace.Event) bool {
	return c.valid && (!c.streamSet || c.stream == ev.Stream)
}

// prologue reports whether the allocation ev, on a stream other than the
// legacy default one, follows an empty_cache call and capture_begin's two
// allocations on its stream, and nothing else: it is a capture's first.
func (c *sinceCall) prologue(ev *trace.Event) bool {
	return ev.Stream != 0 && c.before(ev) && c.n == 2 && c.small
}
