package replay

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// TestLiveReserve: slots reserved for n numbers hold n blocks in the array
// reserve made, and keep the blocks put before it.
func TestLiveReserve(t *testing.T) {
	const n = 10_000
	var l liveBlocks
	for i := int32(1); i <= 100; i++ {
		l.put(uint64(i)<<9, i, blockRef{addr: uint64(i) << 9})
	}
	l.reserve(n)
	arr := unsafe.SliceData(l.byRef)
	for i := int32(101); i <= n; i++ {
		l.put(uint64(i)<<9, i, blockRef{addr: uint64(i) << 9})
	}
	if unsafe.SliceData(l.byRef) != arr {
		t.Errorf("slots reserved for %d numbers were made again (capacity %d)", n, cap(l.byRef))
	}
	for i := int32(1); i <= n; i += 97 {
		if s := l.slot(uint64(i)<<9, i); s == nil || s.addr != uint64(i)<<9 {
			t.Fatalf("block %d not found at its number", i)
		}
	}
}

// TestReplayBlocks: Options.Blocks, as tracer import sets it, changes
// nothing a numbered replay reports or emits, whether it is too small for
// the blocks or large enough.
func TestReplayBlocks(t *testing.T) {
	run := func(evs []trace.Event, o Options) ([]DeviceResult, []trace.Event) {
		in := slices.Clone(evs)
		var n BlockNumbers
		n.Number(in)
		var out []trace.Event
		o.Numbered = true
		res, err := Run(context.Background(), NewSliceSource(in), o, ObserverFunc(func(ev *trace.Event) { out = append(out, *ev) }))
		if err != nil {
			t.Fatal(err)
		}
		devs := slices.Clone(res.Devices)
		for i := range devs {
			devs[i].Allocator = nil // a pointer of its own in each replay
		}
		return devs, out
	}
	names := snapshotNames(t)
	for _, name := range names[:min(4, len(names))] {
		s := loadSnapshot(t, name)
		conf, err := allocator.ParseConf(s.conf)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit, Recorded: !isWrap(name)}
		want, wantEvs := run(s.events, o)
		for _, blocks := range []int{1, 100_000} {
			o.Blocks = blocks
			got, gotEvs := run(s.events, o)
			if !reflect.DeepEqual(got, want) || !slices.Equal(gotEvs, wantEvs) {
				t.Errorf("%s: Blocks %d changes the replay", name, blocks)
			}
		}
	}
}
