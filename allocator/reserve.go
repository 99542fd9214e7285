package allocator

import "github.com/tracer-dev/tracer/internal/grow"

// Reserve makes room in a's block arena for n blocks at once, for a caller
// that knows about how many it will hold (tracer import's annotation, from
// its scan of the recording): the arena is then made once instead of
// doubled to that size, each doubling copying every block with the old
// array still resident. It returns the pages of the room, the blocks past
// those a holds, which the caller may fault in from another goroutine
// while a runs (grow.Pages.Populate), in the order a fills them, so that
// a's thread does not take a fault each time it first reaches a page. It
// never shrinks the arena and changes nothing a caller can see; past n the
// arena doubles as before.
func (a *Allocator) Reserve(n int) grow.Pages { return a.ReserveOff(n, nil) }

// ReserveOff is Reserve with the room made in h (grow.MakeOff: outside the
// Go heap, where the collector does not count it), which must outlive a's
// use of it.
func (a *Allocator) ReserveOff(n int, h *grow.OffHeap) grow.Pages {
	n++ // block 0 is never used
	if n > cap(a.blocks) {
		var t []block
		if h != nil {
			t = grow.MakeOff[block](h, len(a.blocks), n, grow.PastFirstHuge)
		} else {
			t = make([]block, len(a.blocks), n)
		}
		copy(t, a.blocks)
		a.blocks = t
	}
	return grow.PagesOf(a.blocks[len(a.blocks):])
}
