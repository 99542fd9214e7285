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

// giveBackHook, when set, receives the stage at whose end each giveBack
// runs (tests).
var giveBackHook func(stage string)

// giveBack hands the heap's garbage back to the system (debug.FreeOSMemory)
// and then drops from the resident set the executable's pages touched so
// far (textpages.Release): the decoder's code and the tables the collector
// read. After a small spilled decode those pages were about half the
// import's peak; what the passes after it run comes back a page at a time.
func giveBack(stage string) {
	if giveBackHook != nil {
		giveBackHook(stage)
	}
	debug.FreeOSMemory()
	textpages.Release()
}
