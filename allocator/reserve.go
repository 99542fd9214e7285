package allocator

// Reserve makes room in a's block arena for n blocks at once, for a caller
// that knows about how many it will hold (tracer import's annotation, from
// its scan of the recording): the arena is then made once instead of
// doubled to that size, each doubling copying every block with the old
// array still resident. It never shrinks the arena and changes nothing a
// caller can see; past n the arena doubles as before.
func (a *Allocator) Reserve(n int) {
	n++ // block 0 is never used
	if n <= cap(a.blocks) {
		return
	}
	t := make([]block, len(a.blocks), n)
	copy(t, a.blocks)
	a.blocks = t
}
