package torchsnap

import (
	"math/bits"
	"slices"
)

// sortByAddr sorts blocks, whose addresses are distinct, by address: a
// validation's blocks live after the trace, listed from its table in hash
// order. A radix sort over the bits in which the addresses differ (block
// addresses share their high bits and their low nine, as PyTorch rounds
// blocks to 512 bytes) in digits of radixBits: three passes or fewer over
// the blocks of a process's device, where a comparison sort of 100k
// blocks took a quarter of the validation's time.
func sortByAddr(blocks []addrPending) {
	if len(blocks) < radixMin {
		slices.SortFunc(blocks, byAddr)
		return
	}
	var and, or uint64 = ^uint64(0), 0
	for i := range blocks {
		and &= blocks[i].addr
		or |= blocks[i].addr
	}
	diff := and ^ or // the bits in which some addresses differ
	lo := uint(bits.TrailingZeros64(diff))
	hi := 64 - uint(bits.LeadingZeros64(diff))
	tmp := make([]addrPending, len(blocks))
	src, dst := blocks, tmp
	var count [1 << radixBits]int
	for shift := lo; shift < hi; shift += radixBits {
		clear(count[:])
		for i := range src {
			count[src[i].addr>>shift&radixMask]++
		}
		at := 0
		for d, c := range count {
			count[d] = at
			at += c
		}
		for i := range src {
			d := src[i].addr >> shift & radixMask
			dst[count[d]] = src[i]
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &blocks[0] {
		copy(blocks, src)
	}
}

const (
	radixBits = 11
	radixMask = 1<<radixBits - 1
	// radixMin is the fewest blocks sortByAddr sorts by radix: below, a
	// comparison sort costs less than clearing the counts.
	radixMin = 4096
)
