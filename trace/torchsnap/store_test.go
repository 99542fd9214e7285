package torchsnap

import (
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestGatherRun: runs of events spanning many chunks and several parts are
// copied exactly (on two goroutines), the store is released behind them, and
// a run used twice is an error.
func TestGatherRun(t *testing.T) {
	testGatherRun(t, 0, 0)
	// A base that holds the first chunks: device 0's run is partly in it
	// (copied), device 1's not at all.
	testGatherRun(t, 3<<chunkBits*48, 0)
	// A base that holds everything: both runs are views.
	testGatherRun(t, 21<<chunkBits*48, 2)
}

func testGatherRun(t *testing.T, size int64, views int) {
	b := newBuilder()
	b.events.sizeFor(size)
	pools := []trace.PoolID{{}, {A: 7, B: 9}}
	const n0, n1 = 20<<chunkBits + 123, 5000 // device 1's run starts inside device 0's last chunk
	for i := range int64(n0 + n1) {
		b.events.add(cev{TimeUs: i, Addr: uint64(i) * 512, Size: i + 1, Stream: uint64(i % 3),
			Stack: trace.StackID(i%5) - 1, Pool: pools[i%2], Kind: trace.Kind(1 + i%3)})
	}
	runs := []*listObj{{evLo: 0, evN: n0}, {evLo: n0, evN: n1}}
	for dev, o := range runs {
		d := &Device{Index: int32(dev)}
		evs, err := b.gatherRun(o, d)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(evs)) != o.evN {
			t.Fatalf("device %d: %d events, want %d", dev, len(evs), o.evN)
		}
		for j, e := range evs {
			i := o.evLo + int64(j)
			want := trace.Event{Seq: int64(j), TimeUs: i, Device: int32(dev), Kind: trace.Kind(1 + i%3), Addr: uint64(i) * 512,
				Size: i + 1, Stream: uint64(i % 3), Pool: pools[i%2], Stack: trace.StackID(i%5) - 1}
			if e != want {
				t.Fatalf("device %d event %d: %+v, want %+v", dev, j, e, want)
			}
		}
	}
	if len(b.events.views) != views {
		t.Errorf("base for %d bytes: %d runs viewed in place, want %d", size, len(b.events.views), views)
	}
	if b.events.chunks[n0>>chunkBits-1] != nil {
		t.Error("chunks behind the copy were not released")
	}
	if _, err := b.gatherRun(runs[0], &Device{}); err == nil {
		t.Error("a run gathered twice: no error")
	}
}
