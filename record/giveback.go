package record

import (
	"runtime/debug"

	"github.com/tracer-dev/tracer/internal/textpages"
)

// giveBackMin is the smallest spilled file whose import hands its garbage
// back (giveBack): after the decode, or after the start state where the
// spill's follower derived it (its tables go back too). Below it, the
// decode's heap is too small for a forced collection to pay (a variable
// for the tests).
var giveBackMin int64 = 1 << 20

// Tests: giveBackHook receives the stage at whose end each giveBack runs,
// on the caller's goroutine; releaseHook runs on the goroutine of its
// release (textpages.Release) before it.
var (
	giveBackHook func(stage string)
	releaseHook  func()
)

// giveBack hands the heap's garbage back to the system (debug.FreeOSMemory)
// and then, on a goroutine of its own, drops from the resident set the
// executable's pages touched so far (textpages.Release): the decoder's code
// and the tables the collector read. After a small spilled decode those
// pages were about half the import's peak; what the passes after it run
// comes back a page at a time. The collection is the caller's to wait for:
// the passes after it reuse the garbage's pages rather than take new ones.
// The release is not: it takes no memory, and the peak comes later, so the
// passes after it go on beside it, off the start state's critical path.
//
// collect false skips the collection: a spilled import's decoder and
// follower make their large tables outside the heap and unmap them
// themselves, so the collection would find little, on the critical path.
func giveBack(stage string, collect bool) {
	if giveBackHook != nil {
		giveBackHook(stage)
	}
	if collect {
		debug.FreeOSMemory()
	}
	hook := releaseHook
	go func() {
		if hook != nil {
			hook()
		}
		textpages.Release()
	}()
}
