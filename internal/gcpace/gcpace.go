// Package gcpace bounds the garbage collector's headroom once the live heap
// is past a few MiB. At GOGC=100 a process's heap grows to twice its live
// heap before a collection; a replay or an import holding a million live
// blocks then peaks at twice the memory those blocks need. The large parts
// of such a heap (the model's block arena, the address maps, the
// summarizer's slab) hold no pointers, so marking it costs little, and a
// collection more often costs little more. While Start's pacer runs, the
// collector's percentage is the one asked for (SetPercent, else the
// process's GOGC) while the live heap is under Headroom; past it the
// percentage falls so that the heap grows by what it allows Headroom, until
// it is a Fall-th of the one asked for (but not under MinPercent), at 16 MiB.
//
// The percentage is constant past that point, and so is the collector's
// cost per allocated byte: a collection's marking grows with the live heap,
// and so does the allocation between two of them. Where the percentage
// falls as the heap grows, each collection costs more per byte than the
// last, and a command's time grows faster than its input; that range is
// kept below the heaps where a command's time counts.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

const (
	// Headroom is the live heap up to which the percentage asked for
	// holds: 4 MiB, the runtime's own least heap goal at GOGC=100.
	Headroom = 4 << 20
	// Fall is the most the pacer divides the percentage asked for by,
	// reached at Fall times Headroom of live heap.
	Fall = 4
	// MinPercent is the lowest percentage the pacer sets.
	MinPercent = 25
)

var (
	mu      sync.Mutex
	base    = -2 // the percentage asked for; -2 until read
	running bool
	set     = debug.SetGCPercent // the runtime's setter; tests watch it
	sample  = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
)

// Start starts the pacer (once per process): after each collection it sets
// the percentage for the next from the live heap it measured.
func Start() {
	mu.Lock()
	defer mu.Unlock()
	if running {
		return
	}
	running = true
	if base == -2 {
		base = debug.SetGCPercent(100)
		debug.SetGCPercent(base)
	}
	arm()
}

// SetPercent sets the percentage asked for, as debug.SetGCPercent does, and
// returns the previous one; the pacer lowers it while the live heap is
// large.
func SetPercent(p int) int {
	mu.Lock()
	defer mu.Unlock()
	prev := set(p)
	if base != -2 {
		prev = base
	}
	base = p
	if running {
		adjust()
	}
	return prev
}

// percent is the percentage for a live heap of live bytes under the asked
// for percentage b: b up to Headroom, then b·Headroom/live, but not under
// b/Fall nor MinPercent. A b of MinPercent or less (or off) holds.
func percent(b int, live uint64) int {
	if b <= MinPercent || live <= Headroom {
		return b
	}
	return max(MinPercent, b/Fall, int(uint64(b)*Headroom/live))
}

// adjust sets the percentage for the live heap measured by the last
// collection. mu is held.
func adjust() {
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	set(percent(base, sample[0].Value.Uint64()))
}

// sentinel is an object made to be collected: its cleanup runs once after
// the collection that finds it unreachable, adjusts the percentage and
// makes the next one. It is 16 bytes, past the tiny allocator, whose
// objects' cleanups may never run.
type sentinel struct{ _ [2]uint64 }

func arm() {
	runtime.AddCleanup(new(sentinel), func(struct{}) {
		mu.Lock()
		defer mu.Unlock()
		adjust()
		arm()
	}, struct{}{})
}
