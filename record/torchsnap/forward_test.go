package torchsnap

import (
	"cmp"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestForward_matchesUndo follows every real snapshot's trace, whole and
// with its first 1–99% cut off (a wrapped history: blocks and segments
// live at the start, frees of blocks never allocated, ranges mapped before
// the trace), and checks that Forward derives the start state undo derives
// backwards: the same blocks with every field, the same segment ranges, the
// same unseen free.
func TestForward_matchesUndo(t *testing.T) {
	followed := 0
	for _, path := range realSnapshots(t) {
		for _, pct := range []int{0, 1, 10, 50, 90, 99} {
			t.Run(fmt.Sprintf("%s/%d%%", name(path), pct), func(t *testing.T) {
				d := mustRead(t, path).Devices[0]
				d.Events = d.Events[len(d.Events)*pct/100:]
				var f Forward
				for lo := 0; lo < len(d.Events); lo += ChunkSize {
					f.Add(d.Events[lo:min(len(d.Events), lo+ChunkSize)])
				}
				if f.invalid {
					t.Fatal("Forward gave up")
				}
				got, gotUnseen := f.startState(d)
				want := newStartState(d)
				wantUnseen, err := want.undoDevice(d)
				if err != nil {
					t.Fatal(err)
				}
				sameStart(t, got, want)
				if gotUnseen != wantUnseen {
					t.Errorf("unseen free: forward %v, undo %v", gotUnseen, wantUnseen)
				}
				followed++
			})
		}
	}
	if followed < 100 {
		t.Errorf("Forward derived only %d start states", followed)
	}
}

// sameStart checks that got, a start state as Forward or parallelStart
// derives it, holds the same blocks and ranges as undo's want.
func sameStart(t *testing.T, got *start, want *startState) {
	t.Helper()
	if g, w := got.blocks, startBlocks(want); !slices.Equal(g, w) {
		t.Errorf("start blocks: forward %d, undo %d", len(g), len(w))
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Errorf("first difference: forward %+v, undo %+v", g[i], w[i])
				break
			}
		}
	}
	gs, ws := got.segs.list(), want.segs.list()
	if len(gs) != len(ws) {
		t.Fatalf("start segments: forward %d, undo %d", len(gs), len(ws))
	}
	for i := range gs {
		if *gs[i] != *ws[i] {
			t.Errorf("start segment %d: forward %+v, undo %+v", i, *gs[i], *ws[i])
		}
	}
}

func startBlocks(st *startState) []liveBlock {
	var bs []liveBlock
	st.blocks.All(func(_ uint64, b *liveBlock) { bs = append(bs, *b) })
	slices.SortFunc(bs, func(a, b liveBlock) int { return cmp.Compare(a.addr, b.addr) })
	return bs
}

// TestForward_contradictions: histories whose events contradict each other
// or the end state (a segment allocated twice, or inside a live range, a
// free of a block freed already, frees without allocs in a row) get undo's
// answer from Forward too.
func TestForward_contradictions(t *testing.T) {
	const mb = 1 << 20
	seg := func(k trace.Kind, addr uint64, size int64) trace.Event {
		return trace.Event{Kind: k, Addr: addr, Size: size, Stack: trace.NoStack}
	}
	blk := func(k trace.Kind, addr uint64, size int64, stack trace.StackID) trace.Event {
		return trace.Event{Kind: k, Addr: addr, Size: size, Stack: stack, Stream: 7}
	}
	end := []Segment{{Addr: 0x1000_0000, TotalSize: 20 * mb, Large: true,
		Blocks: []Block{{Addr: 0x1000_0000, Size: 20 * mb, RequestedSize: 3 * mb, State: ActiveAllocated, Stack: 4}}}}
	cases := []struct {
		name string
		evs  []trace.Event
	}{
		{"segment_alloc twice", []trace.Event{seg(trace.KindSegmentAlloc, 0x2000_0000, 2*mb), seg(trace.KindSegmentAlloc, 0x2000_0000, 2*mb)}},
		{"segment_free twice", []trace.Event{seg(trace.KindSegmentFree, 0x2000_0000, 2*mb), seg(trace.KindSegmentFree, 0x2000_0000, 2*mb)}},
		{"freed with another size", []trace.Event{seg(trace.KindSegmentAlloc, 0x2000_0000, 2*mb), seg(trace.KindSegmentFree, 0x2000_0000, 4*mb)}},
		{"freed last, there at the end", []trace.Event{seg(trace.KindSegmentAlloc, 0x1000_0000, 20*mb), seg(trace.KindSegmentFree, 0x1000_0000, 20*mb)}},
		{"allocated inside a live range", []trace.Event{seg(trace.KindSegmentAlloc, 0x1000_0000+2*mb, 2*mb)}},
		{"inside a range freed later", []trace.Event{seg(trace.KindSegmentAlloc, 0x3000_0000+2*mb, 2*mb),
			seg(trace.KindSegmentFree, 0x3000_0000+2*mb, 2*mb), seg(trace.KindSegmentFree, 0x3000_0000, 20*mb)}},
		{"reused after its free", []trace.Event{seg(trace.KindSegmentFree, 0x3000_0000, 20*mb),
			seg(trace.KindSegmentAlloc, 0x3000_0000+2*mb, 2*mb)}},
		{"unmapped then mapped beside", []trace.Event{seg(trace.KindSegmentUnmap, 0x4000_0000, 2*mb),
			seg(trace.KindSegmentMap, 0x4000_0000+2*mb, 2*mb), seg(trace.KindSegmentUnmap, 0x4000_0000+4*mb, 2*mb)}},
		{"double free of a block", []trace.Event{blk(trace.KindAlloc, 0x1000_0000, mb, 1), blk(trace.KindFreeRequested, 0x1000_0000, mb, 2),
			blk(trace.KindFreeCompleted, 0x1000_0000, mb, 2), blk(trace.KindFreeRequested, 0x1000_0000, mb, 3),
			blk(trace.KindFreeCompleted, 0x1000_0000, mb, 3)}},
		{"double alloc of a block", []trace.Event{blk(trace.KindAlloc, 0x1000_0000, mb, 1), blk(trace.KindAlloc, 0x1000_0000, mb, 2),
			blk(trace.KindFreeRequested, 0x1000_0000, mb, 3)}},
		{"frees in a row", []trace.Event{blk(trace.KindFreeRequested, 0x1000_0000, mb, 1), blk(trace.KindFreeRequested, 0x1000_0000, 2*mb, 2),
			blk(trace.KindAlloc, 0x1000_0000, 3*mb, 3)}},
		{"frees in a row, then the end", []trace.Event{blk(trace.KindFreeRequested, 0x1000_0000, mb, 1), blk(trace.KindFreeRequested, 0x1000_0000, 2*mb, 2)}},
		{"free_completed first", []trace.Event{blk(trace.KindFreeCompleted, 0x5000, mb, 1), blk(trace.KindAlloc, 0x5000, 2*mb, 2)}},
		{"requested then completed", []trace.Event{blk(trace.KindFreeRequested, 0x5000, mb, 1), blk(trace.KindFreeCompleted, 0x5000, 2*mb, 2)}},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			d := &Device{Segments: end, Events: c.evs}
			var f Forward
			f.Add(c.evs)
			if !sameAsUndo(t, d, &f) {
				t.Fatal("parallelStart declined")
			}
		})
	}
}

// sameAsUndo checks that f, which followed d's events, and parallelStart
// (made to run on d) derive the start state and unseen free that undo
// derives; it reports whether parallelStart ran.
func sameAsUndo(t *testing.T, d *Device, f *Forward) bool {
	t.Helper()
	want := newStartState(d)
	wantUnseen := want.undo(d.Events)
	got, gotUnseen := f.startState(d)
	sameStart(t, got, want)
	if gotUnseen != wantUnseen {
		t.Errorf("unseen free: forward %v, undo %v", gotUnseen, wantUnseen)
	}
	defer func(n, procs int) { parallelStartMin = n; runtime.GOMAXPROCS(procs) }(parallelStartMin, runtime.GOMAXPROCS(4))
	parallelStartMin = 1
	par, parUnseen, ok := d.parallelStart()
	if !ok {
		return false
	}
	sameStart(t, par, want)
	if parUnseen != wantUnseen {
		t.Errorf("unseen free: parallel %v, undo %v", parUnseen, wantUnseen)
	}
	return true
}

// TestOpenFollowed: a Forward fed by OpenFollowed covers the device of a
// one-device snapshot, and ReconstructFollowed gives what Reconstruct gives
// on the snapshot decoded in memory.
func TestOpenFollowed(t *testing.T) {
	for _, path := range realSnapshots(t) {
		t.Run(name(path), func(t *testing.T) {
			var f Forward
			calls := 0
			s, err := OpenFollowed(path, t.TempDir(), func(evs []trace.Event) {
				calls++
				f.Add(evs)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			mem := mustRead(t, path)
			if len(s.Devices) != 1 || !f.Covers(s.Devices[0]) {
				t.Fatalf("%d devices; Forward covers the first: %v", len(s.Devices), len(s.Devices) > 0 && f.Covers(s.Devices[0]))
			}
			if want := (s.Devices[0].Len() + ChunkSize - 1) / ChunkSize; int64(calls) != want {
				t.Errorf("follow called %d times for %d events", calls, s.Devices[0].Len())
			}
			got, err := s.Devices[0].ReconstructFollowed(&f, roundSize)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := mem.Devices[0].Reconstruct(roundSize)
			if !slices.Equal(got, want) || s.Devices[0].Truncated != mem.Devices[0].Truncated {
				t.Errorf("ReconstructFollowed: %d events (truncated %v), Reconstruct %d (%v)",
					len(got), s.Devices[0].Truncated, len(want), mem.Devices[0].Truncated)
			}
		})
	}
}

// TestParallelStart_matchesUndo: the start state derived on several cores
// from a trace in memory is undo's, on every real snapshot whole and cut
// (as TestForward_matchesUndo) and on the contradicting histories, with 2,
// 4 and 16 shares of the addresses.
func TestParallelStart_matchesUndo(t *testing.T) {
	defer func(n int) { parallelStartMin = n }(parallelStartMin)
	parallelStartMin = 1
	for _, procs := range []int{2, 4, 16} {
		prev := runtime.GOMAXPROCS(procs)
		derived := 0
		for _, path := range realSnapshots(t) {
			for _, pct := range []int{0, 10, 50, 99} {
				d := mustRead(t, path).Devices[0]
				d.Events = d.Events[len(d.Events)*pct/100:]
				got, gotUnseen, ok := d.parallelStart()
				if !ok {
					t.Fatalf("%s/%d%%: parallelStart declined", name(path), pct)
				}
				want := newStartState(d)
				wantUnseen, err := want.undoDevice(d)
				if err != nil {
					t.Fatal(err)
				}
				sameStart(t, got, want)
				if gotUnseen != wantUnseen {
					t.Errorf("%s/%d%%, %d procs: unseen free: parallel %v, undo %v", name(path), pct, procs, gotUnseen, wantUnseen)
				}
				derived++
			}
		}
		runtime.GOMAXPROCS(prev)
		if derived < 40 {
			t.Errorf("%d procs: only %d start states derived", procs, derived)
		}
	}
}

// TestMergeFind: the lookups mergeFind splits into ranges of the segments'
// blocks give each block the act a walk of the blocks in order gives it,
// whatever the number of shares and lookup goroutines (findParts) against
// the blocks, with empty segments and inactive blocks among them.
func TestMergeFind(t *testing.T) {
	for _, per := range []int{findPartBlocks, 3, 1} {
		t.Run(fmt.Sprintf("%d blocks a part", per), func(t *testing.T) {
			defer func(n, procs int) { findPartBlocks = n; runtime.GOMAXPROCS(procs) }(findPartBlocks, runtime.GOMAXPROCS(8))
			findPartBlocks = per
			testMergeFind(t)
		})
	}
}

func testMergeFind(t *testing.T) {
	for _, counts := range [][]int{{}, {0}, {1}, {0, 3, 0, 0, 5, 1, 0}, {7, 0, 2}, {40, 1, 0, 13}} {
		var segs []Segment
		addr := uint64(0x1000_0000)
		for _, c := range counts {
			s := Segment{Addr: addr}
			for k := range c {
				st := ActiveAllocated
				if k%4 == 3 {
					st = Inactive
				}
				s.Blocks = append(s.Blocks, Block{Addr: addr, Size: 512, State: st})
				addr += 512
			}
			segs = append(segs, s)
		}
		d := &Device{Segments: segs}
		for _, k := range []int{1, 2, 4, 16} {
			shift := uint(bits.Len(uint(k)) - 1)
			shareOf := func(a uint64) int { return share(a, shift) }
			fs := make([]Forward, k)
			// Every third address allocated in the trace, every fifth
			// freed first: the three acts.
			for a := uint64(0x1000_0000); a < addr; a += 512 {
				switch i := (a - 0x1000_0000) / 512; {
				case i%3 == 0:
					fs[shareOf(a)].block(&trace.Event{Kind: trace.KindAlloc, Addr: a})
				case i%5 == 0:
					fs[shareOf(a)].block(&trace.Event{Kind: trace.KindFreeRequested, Addr: a})
				}
			}
			acts, _ := mergeFind(d, fs, shareOf)
			i := 0
			for _, s := range segs {
				for _, b := range s.Blocks {
					want := endDropped
					if b.State.Live() {
						switch r := fs[shareOf(b.Addr)].addrs.Ref(b.Addr); {
						case r == nil:
							want = endKept
						case r.res == resChain:
							want = endChained
						}
					}
					if acts[i] != want {
						t.Errorf("segments %v, %d shares: block %d (%#x): act %d, want %d", counts, k, i, b.Addr, acts[i], want)
					}
					i++
				}
			}
			if len(acts) != i {
				t.Errorf("segments %v, %d shares: %d acts for %d blocks", counts, k, len(acts), i)
			}
		}
	}
}

// TestReserveShare: a share's table, sized from its allocs before its
// walk, holds a history of 1.5 allocs an address (the small program's)
// without growing, and one of an address an alloc with one doubling at
// most.
func TestReserveShare(t *testing.T) {
	for _, c := range []struct{ addrs, allocs, most int }{{100_000, 150_000, 1}, {100_000, 100_000, 2}} {
		var f Forward
		f.reserveShare(c.allocs)
		reserved := f.addrs.Pages().Len()
		for i := range c.allocs {
			a := uint64(1<<32 + (i%c.addrs)*512)
			f.step(a, trace.KindAlloc)
			f.step(a, trace.KindFreeRequested)
			f.step(a, trace.KindFreeCompleted)
		}
		if got := f.addrs.Pages().Len(); f.addrs.Len() != c.addrs || got > c.most*reserved {
			t.Errorf("%d allocs at %d addresses: %d keys, table of %d slots; reserved %d, want at most %dx", c.allocs, c.addrs, f.addrs.Len(), got, reserved, c.most)
		}
	}
}
