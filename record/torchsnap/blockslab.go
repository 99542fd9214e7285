package torchsnap

import (
	"cmp"
	"slices"
	"sync/atomic"
)

// blockStore holds the block dicts converted since every one before them
// went into a segment (toSegment), the first being block number blockBase,
// in slabs: a segment whose blocks are a run of one slab, in order, after
// every run taken before (viewed), keeps that run as its Blocks, so that a
// block is copied once, from its dict, where a segment's own copy was a
// second. The segments of a snapshot are converted only as the segments
// list's APPENDS settles them, a thousand at a time, so a million blocks
// can wait here: a full slab is never copied whole, only the blocks of the
// list being filled move to the next one (newSlab), so that its run stays
// in one slab.
type blockStore struct {
	slabs [][]Block // the last is being filled
	// first[s] numbers slabs[s][0]; the blocks of slab s are those below
	// first[s+1] (the ones past it moved on).
	first   []int64
	nBlocks int64
	// noAddr are the runs [from, to) of the numbers of blocks without an
	// address, ascending.
	noAddr     [][2]int64
	blockBase  int64
	viewed     int64 // blocks below are in a segment's view, or skipped
	lastViewed bool  // a segment views the last slab
	segBlocks  int64 // blocks in the segments converted so far
	// made, while blockAhead's workers run, has slabs of blockSlab blocks
	// made and faulted in on another core (blockAhead.prepare).
	made <-chan []Block
}

// Tests: blockCopies counts the blocks copied after their conversion (to
// a segment of its own, or moved to a new slab), blockValues the values
// made for blocks in lists.
var blockCopies, blockValues atomic.Int64

type blockRec struct {
	Block
	hasAddr bool
}

// blockSlab is the blocks a slab is sized for once as many were converted
// (the first slabs are smaller: a snapshot of a few blocks takes a few KB).
const blockSlab = 1 << 16

// addBlock appends bl and returns its number.
func (b *blockStore) addBlock(bl blockRec) int64 {
	if k := len(b.slabs) - 1; k < 0 || len(b.slabs[k]) == cap(b.slabs[k]) {
		b.newSlab(0, 1)
	}
	n := b.blockBase + b.nBlocks
	if !bl.hasAddr {
		if k := len(b.noAddr); k > 0 && b.noAddr[k-1][1] == n {
			b.noAddr[k-1][1]++
		} else {
			b.noAddr = append(b.noAddr, [2]int64{n, n + 1})
		}
	}
	k := len(b.slabs) - 1
	b.slabs[k] = append(b.slabs[k], bl.Block)
	b.nBlocks++
	return n
}

// addBlocks appends the blocks of blks, for which room made room, as
// addBlock would each in turn.
func (b *blockStore) addBlocks(blks []flatBlk) {
	k := len(b.slabs) - 1
	if k < 0 || cap(b.slabs[k])-len(b.slabs[k]) < len(blks) {
		for j := range blks {
			b.addBlock(blks[j].bl)
		}
		return
	}
	s := b.slabs[k]
	for j := range blks {
		if !blks[j].bl.hasAddr {
			n := b.blockBase + b.nBlocks + int64(j)
			if k := len(b.noAddr); k > 0 && b.noAddr[k-1][1] == n {
				b.noAddr[k-1][1]++
			} else {
				b.noAddr = append(b.noAddr, [2]int64{n, n + 1})
			}
		}
		s = append(s, blks[j].bl.Block)
	}
	b.slabs[k] = s
	b.nBlocks += int64(len(blks))
}

// room makes room in the last slab for more blocks to be appended to a
// list whose last keep blocks are the last ones converted: where a new
// slab is needed, those move to it, so that the list's run stays in one.
func (b *blockStore) room(keep, more int64) {
	k := len(b.slabs) - 1
	if k >= 0 && int64(cap(b.slabs[k])-len(b.slabs[k])) >= more {
		return
	}
	if k < 0 || keep > int64(len(b.slabs[k])) || b.blockBase+b.nBlocks-keep < b.first[k] {
		keep = 0
	}
	b.newSlab(keep, keep+more)
}

// newSlab starts a slab with room for at least need blocks, the last keep
// of the last slab moved to it: twice need, and as many as were converted
// so far up to blockSlab; one made ahead where there is one (made).
func (b *blockStore) newSlab(keep, need int64) {
	var s []Block
	if 2*need <= blockSlab && b.made != nil {
		select {
		case s = <-b.made:
		default:
		}
	}
	if s == nil {
		s = make([]Block, 0, max(256, 2*need, min(blockSlab, b.blockBase+b.nBlocks)))
	}
	first := b.blockBase + b.nBlocks
	if keep > 0 {
		k := len(b.slabs) - 1
		old := b.slabs[k]
		s = append(s, old[len(old)-int(keep):]...)
		b.slabs[k] = old[: len(old)-int(keep) : len(old)-int(keep)]
		first -= keep
		blockCopies.Add(keep)
	}
	b.slabs = append(b.slabs, s)
	b.first = append(b.first, first)
	b.lastViewed = false
}

// dropBlocks empties the store, all of whose blocks segments have taken.
// The next blocks go to the rest of the last slab; to its start if no
// segment views it (a snapshot whose segments copied their blocks, or
// JSON's, converted one at a time, reuses its memory).
func (b *blockStore) dropBlocks() {
	b.blockBase += b.nBlocks
	b.nBlocks = 0
	b.viewed = max(b.viewed, b.blockBase)
	b.noAddr = b.noAddr[:0]
	k := len(b.slabs) - 1
	last := b.slabs[k]
	if b.lastViewed {
		last = last[len(last):len(last):cap(last)]
	} else {
		last = last[:0]
	}
	clear(b.slabs[:k]) // the collector's, or the segments'
	b.slabs = append(b.slabs[:0], last)
	b.first = append(b.first[:0], b.blockBase)
	b.lastViewed = false
}

// slabOf returns the slab that holds block number i (in the store), and
// the index of the block in it.
func (b *blockStore) slabOf(i int64) (s int, j int64) {
	s, _ = slices.BinarySearch(b.first, i+1) // the last slab numbered from i or before
	s--
	return s, i - b.first[s]
}

// block returns block number i, which is in the store.
func (b *blockStore) block(i int64) blockRec {
	s, j := b.slabOf(i)
	r := b.noAddrFrom(i)
	none := r < len(b.noAddr) && b.noAddr[r][0] <= i
	return blockRec{Block: b.slabs[s][j], hasAddr: !none}
}

// noAddrFrom returns the first run of noAddr that ends past block i.
func (b *blockStore) noAddrFrom(i int64) int {
	j, _ := slices.BinarySearchFunc(b.noAddr, i, func(r [2]int64, i int64) int { return cmp.Compare(r[1]-1, i) })
	return j
}

// viewBlocks returns the blocks that vals, a segment's blocks list, names
// as a view of a slab, where they are a run of one after viewed; ok is
// false otherwise (the segment copies them: copyBlocks).
func (b *blockStore) viewBlocks(vals []value, addr uint64) (_ []Block, ok bool) {
	if len(vals) == 0 || vals[0].k != vBlock {
		return nil, false
	}
	lo := vals[0].i
	for k, v := range vals {
		if v != (value{vBlock, lo + int64(k)}) {
			return nil, false
		}
	}
	return b.viewRun(lo, int64(len(vals)), addr)
}

// viewRun returns blocks lo to lo+n-1 as a view of a slab, where they lie
// in one after viewed; ok is false otherwise. A block of the run without
// an address gets one there, where the one before it ends (from addr, the
// segment's), as copyBlocks would place it: no other segment reads it
// (block reads its address as missing still).
func (b *blockStore) viewRun(lo, n int64, addr uint64) (_ []Block, ok bool) {
	if n == 0 || lo < b.viewed || lo < b.blockBase || lo+n > b.blockBase+b.nBlocks {
		return nil, false
	}
	s, j := b.slabOf(lo)
	if s+1 < len(b.first) && lo+n > b.first[s+1] {
		return nil, false // the run spans slabs
	}
	b.viewed = lo + n
	b.lastViewed = b.lastViewed || s == len(b.slabs)-1
	run := b.slabs[s][j : j+n : j+n]
	r := b.noAddrFrom(lo)
	if r == len(b.noAddr) || b.noAddr[r][0] >= lo+n {
		return run, true
	}
	for k := range run {
		num := lo + int64(k)
		if r < len(b.noAddr) && b.noAddr[r][1] <= num {
			r++
		}
		if r < len(b.noAddr) && b.noAddr[r][0] <= num {
			run[k].Addr = addr
		}
		addr = run[k].Addr + uint64(run[k].Size)
	}
	return run, true
}
