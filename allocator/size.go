package allocator

import "math/bits"

// roundSize is round_size (§3.1): the block size a request of n bytes needs.
func (c *Conf) roundSize(n int64) int64 {
	q := c.MinBlockSize
	if n < q {
		return q
	}
	// In size_t arithmetic, as PyTorch: a division of 2^63 (RoundupDivisions
	// holds it as a negative int64) is valid, and q*d may wrap around.
	d := c.divisions(n)
	if uint64(d) > 1 && uint64(n) > uint64(q)*uint64(d) {
		return roundupNextDivision(n, d)
	}
	return (n + q - 1) &^ (q - 1)
}

// divisions is roundup_power2_divisions(n) (§3.2): interval
// floor(log2(n)) - 20, clamped to [0, 15].
func (c *Conf) divisions(n int64) int64 {
	i := bits.Len64(uint64(n)) - 1 - 20
	if i < 0 {
		i = 0
	} else if i > 15 {
		i = 15
	}
	return c.RoundupDivisions[i]
}

// roundupNextDivision is roundup_power2_next_division.
func roundupNextDivision(n, d int64) int64 {
	if n&(n-1) == 0 {
		return n
	}
	floor := int64(1) << (bits.Len64(uint64(n)) - 1)
	step := floor >> (bits.Len64(uint64(d)) - 1)
	if step == 0 {
		return 2 * floor
	}
	return (n + step - 1) / step * step
}

// allocationSize is get_allocation_size (§3.4): the cudaMalloc size of a new
// segment for a rounded request.
func (c *Conf) allocationSize(size int64) int64 {
	switch {
	case size <= c.SmallSize:
		return c.SmallBuffer
	case size < c.MinLargeAlloc:
		return c.LargeSegmentSize
	default:
		return (size + c.RoundLarge - 1) / c.RoundLarge * c.RoundLarge
	}
}

// RoundSize is round_size: the block size PyTorch gives a request of n bytes
// before any unsplit remainder is added.
func (c *Conf) RoundSize(n int64) int64 { return c.roundSize(n) }

// AllocationSize is get_allocation_size for a request of n bytes: the size of
// the segment a fresh cudaMalloc would get.
func (c *Conf) AllocationSize(n int64) int64 { return c.allocationSize(c.roundSize(n)) }
