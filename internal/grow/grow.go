// Package grow grows the large, pointer-free arrays of a replay (the
// model's block arena, the summarizer's lists, the numbered live blocks)
// by doubling. append grows a large slice by a quarter at a time, and each
// array it leaves behind stays resident until the runtime gives it back:
// the old arrays of one grown to n entries by quarters add up to about 4n
// entries of memory, by doubling to n; the capacity not yet used is never
// touched, so it costs no resident memory.
package grow

// Double returns s copied into a new array of twice its capacity, or of
// need entries if that is more (64 at the least); its length is len(s).
func Double[E any](s []E, need int) []E {
	t := make([]E, len(s), max(64, 2*cap(s), need))
	copy(t, s)
	return t
}
