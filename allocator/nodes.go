package allocator

import "sync/atomic"

// nodeSupply hands out the B-tree nodes of an allocator's crowded size
// classes (kTree.nodes) from slabs that another goroutine made and faulted
// in ahead (Allocator.NodesAhead), so that the allocator's thread neither
// allocates them nor takes a page fault on each: tracer import's
// annotation of the seed experiment (millions of blocks of one size freed
// one after another into one class) made a leaf every few dozen frees
// there. Without a slab made ahead (the default: nothing calls
// NodesAhead) the nodes are allocated one by one, as before.
type nodeSupply struct {
	// cur is the slab being handed out, and more the slabs taken from
	// ready after it, on the allocator's goroutine only.
	cur  nodeSlab
	more *nodeSlab
	// ready is the next slabs, made by NodesAhead (slabsAhead of them, or
	// fewer for a small replay); nil once taken.
	ready atomic.Pointer[nodeSlab]
}

// nodeSlab is nodes not yet handed out: leaves, and inner nodes in the
// proportion an ascending run of keys makes them (a split inner node
// keeps half of its children; a split leaf three quarters of its keys);
// next is the slab made after it.
type nodeSlab struct {
	leaves []kLeaf
	inners []kInner
	next   *nodeSlab
}

const (
	slabLeaves = 64 // 134 KiB
	slabInners = slabLeaves / (fanCap / 2)
	// slabsAhead is how many slabs NodesAhead makes at once: the
	// allocator takes them together, and finds nodes made ahead until the
	// goroutine that calls NodesAhead has been late by as many slabs (on
	// a busy machine it was late by more than one).
	slabsAhead = 4
)

// leaf returns a zero leaf from the slabs, or nil if none is left.
func (ns *nodeSupply) leaf() *kLeaf { return takeNode(ns, &ns.cur.leaves) }

// inner returns a zero inner node from the slabs, or nil if none is left.
func (ns *nodeSupply) inner() *kInner { return takeNode(ns, &ns.cur.inners) }

// takeNode hands out the first of *free, a list of ns.cur, taking the next
// slab first if it is empty; nil if there is none.
func takeNode[N any](ns *nodeSupply, free *[]N) *N {
	if len(*free) == 0 && !ns.next() {
		return nil
	}
	n := &(*free)[0]
	*free = (*free)[1:]
	return n
}

// next takes the next slab made ahead, if there is one, keeping what is
// left of the current slab's other kind of node.
func (ns *nodeSupply) next() bool {
	s := ns.more
	if s == nil {
		if s = ns.ready.Swap(nil); s == nil {
			return false
		}
	}
	ns.more, s.next = s.next, nil
	if len(ns.cur.leaves) > 0 {
		s.leaves = ns.cur.leaves
	}
	if len(ns.cur.inners) > 0 {
		s.inners = ns.cur.inners
	}
	ns.cur = *s
	return true
}

// NodesAhead makes the next slabs of a's free sets' tree nodes and faults
// them in, unless some are waiting: a goroutine beside a's replay calls it
// now and then, often enough that the replay finds one ready when it needs
// nodes (a slab holds 64 leaves, 3,072 free blocks or more; it makes
// slabsAhead of them). It is safe to call while a is in use (the only
// method of a that is); what a replays and reports is the same with and
// without it.
func (a *Allocator) NodesAhead() { a.NodesAheadFor(0) }

// NodesAheadFor is NodesAhead for a replay of at most blocks live blocks
// (0: not known): it makes no more leaves than the trees of that many free
// blocks hold at a quarter full (aheadLeaves), so that a small replay
// neither allocates nor faults in slabs it will not reach. A tree that
// outgrows them takes the next ones made, or nodes allocated one by one,
// as without slabs: the sizes change only where the memory lies.
func (a *Allocator) NodesAheadFor(blocks int) {
	ns := &a.pages.nodes
	if ns.ready.Load() != nil {
		return
	}
	leaves := aheadLeaves(blocks)
	var first *nodeSlab
	for leaves > 0 {
		nl := min(leaves, slabLeaves)
		leaves -= nl
		ni := (nl*slabInners + slabLeaves - 1) / slabLeaves
		s := &nodeSlab{leaves: make([]kLeaf, nl), inners: make([]kInner, ni), next: first}
		// Fault the pages in: one write to each leaf (2 KiB apart) and inner node.
		for i := range s.leaves {
			s.leaves[i].n = 0
		}
		for i := range s.inners {
			s.inners[i].n = 0
		}
		first = s
	}
	ns.ready.Store(first)
}

// aheadLeaves is how many leaves NodesAheadFor makes for blocks live
// blocks: slabsAhead slabs' (the most, and what an unknown count gets),
// or fewer where blocks free blocks, each tree's leaves a quarter full
// (minFill keys) at least, fill fewer; one at least.
func aheadLeaves(blocks int) int {
	most := slabsAhead * slabLeaves
	if blocks <= 0 || blocks >= most*minFill {
		return most
	}
	return max(1, (blocks+minFill-1)/minFill)
}
