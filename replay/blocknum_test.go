package replay

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// replayBoth replays evs by address and with the blocks numbered
// (BlockNumbers, Options.Numbered; PartNumbers in 3 parts too) under opts
// and fails t where the results, the errors or the replayed events differ.
func replayBoth(t *testing.T, name string, evs []trace.Event, opts Options) {
	t.Helper()
	replayNumbered(t, name, evs, opts, 1)
	replayNumbered(t, name+"/3 parts", evs, opts, 3)
}

// replayNumbered is replayBoth with the blocks numbered in parts parts.
// The numbered replay runs once more with no observer, where the calm
// runs take bareReqs: its results and final segments must be the same.
func replayNumbered(t *testing.T, name string, evs []trace.Event, opts Options, parts int) {
	t.Helper()
	run := func(numbered, observed bool) ([]DeviceResult, []trace.Event, string, [][]allocator.SegmentInfo) {
		in := slices.Clone(evs)
		if numbered {
			numberInParts(in, parts, 7) // batches of any size
		}
		var out []trace.Event
		o := opts
		o.Numbered = numbered
		var obs Observer
		if observed {
			obs = ObserverFunc(func(ev *trace.Event) { out = append(out, *ev) })
		}
		res, err := Run(context.Background(), NewSliceSource(in), o, obs)
		if err != nil {
			return nil, out, err.Error(), nil
		}
		devs := slices.Clone(res.Devices)
		var segs [][]allocator.SegmentInfo
		for i := range devs {
			segs = append(segs, devs[i].Allocator.Segments())
			devs[i].Allocator = nil // a pointer of its own in each replay
		}
		return devs, out, "", segs
	}
	want, wantEvs, wantErr, wantSegs := run(false, true)
	got, gotEvs, gotErr, _ := run(true, true)
	if gotErr != wantErr {
		t.Errorf("%s: numbered replay fails with %q, by address with %q", name, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: numbered replay's result differs:\n got %+v\nwant %+v", name, got, want)
	}
	if !slices.Equal(gotEvs, wantEvs) {
		i := 0
		for i < min(len(gotEvs), len(wantEvs)) && gotEvs[i] == wantEvs[i] {
			i++
		}
		t.Errorf("%s: numbered replay emits %d events, by address %d; first difference at %d", name, len(gotEvs), len(wantEvs), i)
	}
	bare, _, bareErr, bareSegs := run(true, false)
	if bareErr != wantErr {
		t.Errorf("%s: numbered replay with no observer fails with %q, by address with %q", name, bareErr, wantErr)
	}
	if !reflect.DeepEqual(bare, want) || !reflect.DeepEqual(bareSegs, wantSegs) {
		t.Errorf("%s: numbered replay with no observer differs:\n got %+v\nwant %+v", name, bare, want)
	}
}

// TestNumberedReplaySame: replaying with the blocks numbered changes
// nothing, on every real snapshot under its recorded settings, under
// expandable segments, and under a limit that makes the replay fail
// requests the recording served.
func TestNumberedReplaySame(t *testing.T) {
	for _, name := range snapshotNames(t) {
		s := loadSnapshot(t, name)
		for _, cs := range []string{s.conf, "expandable_segments:True"} {
			conf, err := allocator.ParseConf(cs)
			if err != nil {
				t.Fatal(err)
			}
			o := Options{Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit, Recorded: cs == s.conf && !isWrap(name)}
			replayBoth(t, name+"/"+cs, s.events, o)
			o.Recorded, o.MemoryLimit = false, 64<<20
			replayBoth(t, name+"/"+cs+"/64MiB", s.events, o)
		}
	}
}

// TestNumberedReplayOdd: numbered or not, a replay treats alike the streams
// a corrupt or cut trace makes: frees of addresses no alloc named, allocs
// at live addresses, free_completed without free_requested (the replay
// keeps that block, whose number the next alloc takes) and cross-stream
// frees, on two devices, with OOMs.
func TestNumberedReplayOdd(t *testing.T) {
	// The block the replay keeps past its free_completed, freed again
	// after its number went to another block.
	kept := []trace.Event{
		{Kind: trace.KindAlloc, Addr: 0x1000, Size: 512},
		{Kind: trace.KindFreeCompleted, Addr: 0x1000, Size: 512},
		{Kind: trace.KindAlloc, Addr: 0x2000, Size: 512},
		{Kind: trace.KindFreeRequested, Addr: 0x1000, Size: 512},
		{Kind: trace.KindFreeCompleted, Addr: 0x1000, Size: 512},
		{Kind: trace.KindFreeRequested, Addr: 0x2000, Size: 512},
		{Kind: trace.KindFreeCompleted, Addr: 0x2000, Size: 512},
	}
	for i := range kept {
		kept[i].Seq, kept[i].Stack = int64(i), trace.NoStack
	}
	replayBoth(t, "kept", kept, Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 30})

	for seed := uint64(1); seed <= 8; seed++ {
		evs := oddStream(seed, 20000)
		for _, cs := range []string{"", "expandable_segments:True"} {
			conf, _ := allocator.ParseConf(cs)
			replayBoth(t, fmt.Sprintf("seed %d %q", seed, cs), evs, Options{Conf: conf, TotalMemory: 256 << 20})
		}
	}
}

// oddStream makes n events of the kinds TestNumberedReplayOdd names, over
// few addresses so that they meet often.
func oddStream(seed uint64, n int) []trace.Event {
	x := seed * 0x9e3779b97f4a7c15
	rand := func(k uint64) uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x % k
	}
	evs := make([]trace.Event, 0, n)
	add := func(kind trace.Kind, dev int32, addr uint64, size int64, stream uint64) {
		evs = append(evs, trace.Event{Seq: int64(len(evs)), Device: dev, Kind: kind, Addr: addr, Size: size,
			Stream: stream, Stack: trace.NoStack})
	}
	type key struct {
		dev  int32
		addr uint64
	}
	pending := map[key]bool{} // a second free_requested of a pending block
	for len(evs) < n {
		dev := int32(rand(2))
		addr := 0x7f0000000000 + rand(300)*0x100000
		size := int64(1 + rand(3<<20))
		stream := rand(2) * 0x1000
		k := key{dev, addr}
		switch r := rand(100); {
		case r < 40:
			add(trace.KindAlloc, dev, addr, size, stream)
		case r >= 85 || pending[k]: // completed later, or never requested
			add(trace.KindFreeCompleted, dev, addr, size, stream)
			delete(pending, k)
		case r < 75: // a synchronous free
			add(trace.KindFreeRequested, dev, addr, size, stream)
			add(trace.KindFreeCompleted, dev, addr, size, stream)
		default: // a cross-stream free, completed later or never
			add(trace.KindFreeRequested, dev, addr, size, stream)
			pending[k] = true
		}
	}
	return evs
}

// TestBlockNumbersBounded: the numbers in use are at most the blocks live
// at once, and a block keeps its number from its alloc to its
// free_completed.
func TestBlockNumbersBounded(t *testing.T) {
	evs := oddStream(3, 50000)
	var n BlockNumbers
	n.Number(evs)
	type key struct {
		dev  int32
		addr uint64
	}
	live := map[key]int32{}
	nlive := map[int32]int{}
	most := map[int32]int{}
	top := map[int32]int32{}
	for i, ev := range evs {
		k := key{ev.Device, ev.Addr}
		old, ok := live[k]
		switch ev.Kind {
		case trace.KindAlloc:
			if ok && old != ev.Ref {
				t.Fatalf("event %d: an alloc at a live address took %d, not its number %d", i, ev.Ref, old)
			}
			if !ok {
				nlive[ev.Device]++
			}
			live[k] = ev.Ref
		case trace.KindFreeRequested, trace.KindFreeCompleted:
			if ev.Ref != old {
				t.Fatalf("event %d: %s numbered %d, want %d", i, ev.Kind, ev.Ref, old)
			}
			if ev.Kind == trace.KindFreeCompleted && ok {
				delete(live, k)
				nlive[ev.Device]--
			}
		}
		top[ev.Device] = max(top[ev.Device], ev.Ref)
		most[ev.Device] = max(most[ev.Device], nlive[ev.Device])
	}
	for d, m := range most {
		if int(top[d]) > m {
			t.Errorf("device %d: numbers up to %d for at most %d blocks live", d, top[d], m)
		}
	}
}

// numberInParts numbers evs in chunks of size events with a PartNumbers
// of parts parts, up to 3 chunks in flight, and returns the events each
// part looked up.
func numberInParts(evs []trace.Event, parts, size int) []int {
	n := NewPartNumbers(parts, false)
	pending := 0
	for lo := 0; lo < len(evs); lo += size {
		n.Start(evs[lo:min(lo+size, len(evs))])
		if pending++; pending > 3 {
			n.Done()
			pending--
		}
	}
	for ; pending > 0; pending-- {
		n.Done()
	}
	n.Close()
	looked := make([]int, parts)
	for i, x := range n.parts {
		looked[i] = x.nums.looked
	}
	return looked
}

// lifetimes names each event by the block its number stands for: the
// index of the alloc that took the number, from then to the
// free_completed that gave it back (-1 for Ref 0), so that two numberings
// that pair the events alike give the same names.
func lifetimes(evs []trace.Event) []int {
	type key struct {
		dev int32
		ref int32
	}
	open := map[key]int{}
	out := make([]int, len(evs))
	for i, ev := range evs {
		out[i] = -1
		if ev.Ref == 0 {
			continue
		}
		k := key{ev.Device, ev.Ref}
		id, ok := open[k]
		if !ok {
			id = i
			open[k] = id
		}
		out[i] = id
		if ev.Kind == trace.KindFreeCompleted {
			delete(open, k)
		}
	}
	return out
}

// TestPartNumbers: numbered in 2 to 5 parts, the events are paired as in
// one (the same lifetimes), every number is its address's part's
// (partOf), each block event is looked up once, by its own part, and the
// numbers stay below the parts times the most blocks any part holds.
func TestPartNumbers(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		evs := oddStream(seed, 30000)
		one := slices.Clone(evs)
		var n BlockNumbers
		n.Number(one)
		want := lifetimes(one)
		for parts := 2; parts <= 5; parts++ {
			got := slices.Clone(evs)
			for i := range got {
				got[i].Ref = -7 // every event's Ref is set
			}
			looked := numberInParts(got, parts, 100+int(seed))
			if !slices.Equal(lifetimes(got), want) {
				t.Fatalf("seed %d, %d parts: the events' pairing differs from one part's", seed, parts)
			}
			total := 0
			for p, k := range looked {
				if k == 0 {
					t.Errorf("seed %d, %d parts: part %d looked nothing up", seed, parts, p)
				}
				total += k
			}
			if total != n.looked {
				t.Errorf("seed %d, %d parts: %d lookups, one part makes %d", seed, parts, total, n.looked)
			}
			live := map[int32]map[uint64]bool{}
			most := 0
			for i, ev := range got {
				if ev.Ref < 0 {
					t.Fatalf("seed %d, %d parts: event %d (%s) not numbered", seed, parts, i, ev.Kind)
				}
				if ev.Ref == 0 {
					continue
				}
				if p := partOf(ev.Addr, int32(parts)); (ev.Ref-1)%int32(parts) != p {
					t.Fatalf("seed %d, %d parts: event %d at %#x numbered %d, not by its part %d", seed, parts, i, ev.Addr, ev.Ref, p)
				}
				p := partOf(ev.Addr, int32(parts))
				if live[p] == nil {
					live[p] = map[uint64]bool{}
				}
				if ev.Kind == trace.KindAlloc {
					live[p][ev.Addr<<1|uint64(ev.Device)] = true
					most = max(most, len(live[p]))
				}
				if ev.Kind == trace.KindFreeCompleted {
					delete(live[p], ev.Addr<<1|uint64(ev.Device))
				}
				if int(ev.Ref) > parts*most {
					t.Fatalf("seed %d, %d parts: number %d past %d parts of %d live", seed, parts, ev.Ref, parts, most)
				}
			}
		}
	}
}

// TestNumberPairs: Number's synchronous frees, numbered with one lookup
// (numberPair), get the numbers number gives event by event, in one part
// and in three, in batches of any size.
func TestNumberPairs(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		evs := oddStream(seed, 30000)
		for parts := 1; parts <= 3; parts += 2 {
			want := slices.Clone(evs)
			numberOneByOne(want, parts)
			got := slices.Clone(evs)
			numberInParts(got, parts, 7+int(seed))
			for i := range got {
				if got[i].Ref != want[i].Ref {
					t.Fatalf("seed %d, %d parts: event %d (%s) numbered %d, event by event %d", seed, parts, i, got[i].Kind, got[i].Ref, want[i].Ref)
				}
			}
		}
	}
}

// numberOneByOne numbers evs as PartNumbers in parts parts does, one
// event at a time (deviceNumbers.number alone).
func numberOneByOne(evs []trace.Event, parts int) {
	nums := make([]BlockNumbers, parts)
	for p := range nums {
		nums[p] = BlockNumbers{part: int32(p), parts: int32(parts)}
	}
	for i := range evs {
		ev := &evs[i]
		if !numbered(ev.Kind) {
			ev.Ref = 0
			continue
		}
		p := 0
		if parts > 1 {
			p = int(partOf(ev.Addr, int32(parts)))
		}
		nums[p].device(ev.Device).number(ev)
	}
}
