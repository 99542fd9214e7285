package replay

import (
	"math"

	"github.com/tracer-dev/tracer/internal/grow"
)

// reserve makes room for blocks numbered up to n (BlockNumbers' numbers),
// so that byRef is made once rather than doubled to that size (see
// Options.Blocks).
func (l *liveBlocks) reserve(n int) { l.reserveOff(n, nil) }

// reserveOff is reserve with the room made in h, if not nil (grow.MakeOff:
// outside the Go heap).
func (l *liveBlocks) reserveOff(n int, h *grow.OffHeap) {
	if n+1 > cap(l.byRef) {
		var t []refSlot
		if h != nil {
			t = grow.MakeOff[refSlot](h, len(l.byRef), n+1, grow.PastFirstHuge)
		} else {
			t = make([]refSlot, len(l.byRef), n+1)
		}
		copy(t, l.byRef)
		l.byRef = t
	}
}

// Reserve makes room in device's numbering for n blocks live at once, so
// that its address table is made once rather than doubled to that size.
func (n *BlockNumbers) Reserve(device int32, blocks int) { n.device(device).at.Reserve(blocks) }

// ReserveOff is Reserve with the table made in h (addrmap.Map.ReserveOff:
// outside the Go heap, and only once the numbering outgrows a small
// table, for a guess of the blocks that may be far too high), which must
// outlive the numbering; with h nil it is Reserve, whose table is made
// now, for Prefault.
func (n *BlockNumbers) ReserveOff(device int32, blocks int, h *grow.OffHeap) {
	if h == nil {
		n.Reserve(device, blocks)
		return
	}
	n.device(device).at.ReserveOff(blocks, h)
}

// Prefault faults in the table of device's live addresses that Reserve
// made (grow.Pages.Populate) on the caller's goroutine, for a caller that
// makes it before the numbering starts: a hash table's keys reach all of
// its pages within the first few hundredths of its peak, each a fault on
// the numbering's thread. It reports false where the system cannot.
func (n *BlockNumbers) Prefault(device int32) bool {
	return n.device(device).at.Pages().Populate(0, math.MaxInt)
}

// arenaFor is the model's arena for n live blocks: theirs, and the free
// blocks between them and at their segments' ends, which on the shapes
// the import meets are a small fraction of them.
func arenaFor(n int) int { return n + n/8 + 64 }
