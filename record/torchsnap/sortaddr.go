package torchsnap

import (
	"math/bits"
	"slices"
)

// sortByAddr sorts blocks, whose addresses are distinct, by address: a
// validation's blocks live after the trace, listed from its table in hash
// order. A radix sort in place (no second list of the blocks beside the
// first, at a moment the import's memory peaks): the blocks are moved
// into buckets by the highest radixBits of the bits in which their
// addresses differ (block addresses share their high bits and their low
// nine, as PyTorch rounds blocks to 512 bytes), and each bucket is sorted
// the same way, or by insertion once small. A comparison sort of 100k
// blocks took a quarter of the validation's time.
func sortByAddr(blocks []addrPending) {
	if len(blocks) < radixMin {
		if len(blocks) > insertMax {
			slices.SortFunc(blocks, byAddr)
			return
		}
		for i := 1; i < len(blocks); i++ {
			x, j := blocks[i], i
			for ; j > 0 && blocks[j-1].addr > x.addr; j-- {
				blocks[j] = blocks[j-1]
			}
			blocks[j] = x
		}
		return
	}
	var and, or uint64 = ^uint64(0), 0
	for i := range blocks {
		and &= blocks[i].addr
		or |= blocks[i].addr
	}
	diff := and ^ or // the bits in which some addresses differ
	hi := 64 - uint(bits.LeadingZeros64(diff))
	shift := uint(0)
	if hi > radixBits {
		shift = hi - radixBits
	}
	digit := func(b *addrPending) uint64 { return b.addr >> shift & radixMask }
	var next, end [1 << radixBits]int32
	for i := range blocks {
		end[digit(&blocks[i])]++
	}
	at := int32(0)
	for d, c := range end {
		next[d] = at
		at += c
		end[d] = at
	}
	// Each block goes to the next free place of its bucket, and the one it
	// displaces to its own, until one of this bucket's comes back.
	for d := range next {
		for next[d] < end[d] {
			x := blocks[next[d]]
			for dx := digit(&x); dx != uint64(d); dx = digit(&x) {
				blocks[next[dx]], x = x, blocks[next[dx]]
				next[dx]++
			}
			blocks[next[d]] = x
			next[d]++
		}
	}
	lo := int32(0)
	for _, e := range end {
		if e-lo > 1 {
			sortByAddr(blocks[lo:e])
		}
		lo = e
	}
}

const (
	radixBits = 12
	radixMask = 1<<radixBits - 1
	// radixMin is the fewest blocks sortByAddr sorts by radix: below, a
	// comparison sort costs less than the buckets' counts.
	radixMin = 512
	// insertMax is the most blocks sorted by insertion, in the buckets.
	insertMax = 48
)
