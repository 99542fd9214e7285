package replay

import (
	"context"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// BenchmarkRunSetup measures what one Run costs besides its events: a
// trace of one alloc and its free, so nearly all of it is making the
// device, the allocator and the result (fresh), or resetting those of the
// previous replay on a Replayer (reuse).
func BenchmarkRunSetup(b *testing.B) {
	evs := []trace.Event{
		{Seq: 0, Kind: trace.KindAlloc, Addr: 1 << 40, Size: 4096, Stack: trace.NoStack},
		{Seq: 1, Kind: trace.KindFreeRequested, Addr: 1 << 40, Size: 4096, Stack: trace.NoStack},
		{Seq: 2, Kind: trace.KindFreeCompleted, Addr: 1 << 40, Size: 4096, Stack: trace.NoStack},
	}
	opts := Options{Conf: allocator.DefaultConf()}
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Run(context.Background(), NewSliceSource(evs), opts, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reuse", func(b *testing.B) {
		var rp Replayer
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rp.Run(context.Background(), NewSliceSource(evs), opts, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
