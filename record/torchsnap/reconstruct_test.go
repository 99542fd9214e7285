package torchsnap

import (
	"fmt"
	"math/rand"
	"runtime"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/tracer-dev/tracer/trace"
)

// roundSize is the default round_size (caching-allocator.md §3.1) without
// roundup_power2_divisions: enough for the structural checks here, which only
// use it for blocks freed during the trace.
func roundSize(n int64) int64 {
	if n < 512 {
		return 512
	}
	return (n + 511) / 512 * 512
}

type simBlock struct {
	req, size int64
	pending   bool
}

type simRange struct {
	addr, end  uint64
	stream     uint64
	expandable bool
}

// forwardSim applies evs to a block map and a list of segment ranges; it is
// deliberately independent of Reconstruct's and Validate's code.
type forwardSim struct {
	t      *testing.T
	blocks map[uint64]*simBlock
	segs   []simRange
}

func (f *forwardSim) inSegment(a uint64) bool {
	for _, s := range f.segs {
		if a >= s.addr && a < s.end {
			return true
		}
	}
	return false
}

func (f *forwardSim) apply(i int, e trace.Event) {
	t := f.t
	switch e.Kind {
	case trace.KindAlloc:
		if f.blocks[e.Addr] != nil {
			t.Errorf("event %d: alloc at live %#x", i, e.Addr)
		}
		if !f.inSegment(e.Addr) {
			t.Errorf("event %d: alloc %#x outside segments", i, e.Addr)
		}
		pending := e.Flags&trace.FlagPending != 0
		f.blocks[e.Addr] = &simBlock{req: e.Size, size: e.BlockSize, pending: pending}
	case trace.KindFreeRequested:
		b := f.blocks[e.Addr]
		if b == nil {
			t.Errorf("event %d: free_requested of dead %#x", i, e.Addr)
			return
		}
		b.pending = true
	case trace.KindFreeCompleted:
		if f.blocks[e.Addr] == nil {
			t.Errorf("event %d: free_completed of dead %#x", i, e.Addr)
		}
		delete(f.blocks, e.Addr)
	case trace.KindSegmentAlloc, trace.KindSegmentMap:
		f.segs = append(f.segs, simRange{e.Addr, e.Addr + uint64(e.Size), e.Stream, e.Kind == trace.KindSegmentMap})
		f.merge()
	case trace.KindSegmentFree:
		for j, s := range f.segs {
			if s.addr == e.Addr {
				f.segs = append(f.segs[:j], f.segs[j+1:]...)
				return
			}
		}
		t.Errorf("event %d: segment_free of unknown %#x", i, e.Addr)
	case trace.KindSegmentUnmap:
		end := e.Addr + uint64(e.Size)
		var out []simRange
		for _, s := range f.segs {
			if end <= s.addr || e.Addr >= s.end {
				out = append(out, s)
				continue
			}
			if s.addr < e.Addr {
				out = append(out, simRange{s.addr, e.Addr, s.stream, true})
			}
			if end < s.end {
				out = append(out, simRange{end, s.end, s.stream, true})
			}
		}
		f.segs = out
	}
}

// merge joins touching mapped ranges of one stream, as a snapshot reports one
// segment per contiguous mapped range of an expandable segment. Plain
// segments may touch (cudaMalloc hands out adjacent ranges) and stay apart.
func (f *forwardSim) merge() {
	sort.Slice(f.segs, func(i, j int) bool { return f.segs[i].addr < f.segs[j].addr })
	var out []simRange
	for _, s := range f.segs {
		if n := len(out); n > 0 && s.expandable && out[n-1].expandable && out[n-1].end == s.addr && out[n-1].stream == s.stream {
			out[n-1].end = s.end
			continue
		}
		out = append(out, s)
	}
	f.segs = out
}

// lostAllocRef is what undo reports about lost allocs, as a forward walk
// finds it: whether a free comes before any alloc of its address since that
// address's last free_completed.
func lostAllocRef(evs []trace.Event) bool {
	seen := map[uint64]bool{}
	for _, e := range evs {
		switch e.Kind {
		case trace.KindAlloc:
			seen[e.Addr] = true
		case trace.KindFreeRequested, trace.KindFreeCompleted:
			if !seen[e.Addr] {
				return true
			}
			if e.Kind == trace.KindFreeCompleted {
				delete(seen, e.Addr)
			}
		}
	}
	return false
}

// TestUndo_lostAlloc compares undo's report of a lost alloc, found walking
// backwards, with the forward walk's, on random histories of a few
// addresses: whole lives of blocks (alloc, free_requested, free_completed),
// cut at a random point as a ring buffer cuts them, some with an event
// dropped or changed, and end states as they follow or random.
func TestUndo_lostAlloc(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	kinds := []trace.Kind{trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted}
	lost := 0
	const histories = 20000
	for n := range histories {
		var evs []trace.Event
		var state [4]int // per address: 0 free, 1 allocated, 2 free requested
		for range rng.Intn(16) {
			a := rng.Intn(4)
			k := kinds[state[a]]
			state[a] = (state[a] + 1) % 3
			evs = append(evs, trace.Event{Kind: k, Addr: uint64(a) * 512, Size: 100})
		}
		if len(evs) > 0 && rng.Intn(2) == 0 {
			evs = evs[rng.Intn(len(evs)):]
		}
		if len(evs) > 0 && rng.Intn(4) == 0 {
			i := rng.Intn(len(evs))
			if rng.Intn(2) == 0 {
				evs = append(evs[:i], evs[i+1:]...)
			} else {
				evs[i].Kind = kinds[rng.Intn(len(kinds))]
			}
		}
		d := &Device{Segments: []Segment{{Addr: 0, TotalSize: 1 << 20}}}
		for a, st := range state {
			if rng.Intn(4) == 0 {
				st = rng.Intn(3)
			}
			if st != 0 {
				d.Segments[0].Blocks = append(d.Segments[0].Blocks, Block{Addr: uint64(a) * 512, Size: 512,
					State: []BlockState{ActiveAllocated, ActivePendingFree}[st-1]})
			}
		}
		d.Events = evs
		got, want := newStartState(d).undo(d.Events), lostAllocRef(d.Events)
		if got != want {
			t.Fatalf("history %d: undo reports a lost alloc %v, the forward walk %v\nend state %+v\nevents %+v",
				n, got, want, d.Segments[0].Blocks, d.Events)
		}
		if got {
			lost++
		}
	}
	t.Logf("%d of %d histories lost an alloc", lost, histories)
}

func checkReconstruction(t *testing.T, d *Device) []trace.Event {
	if got, want := newStartState(d).undo(d.Events), lostAllocRef(d.Events); got != want {
		t.Errorf("undo reports a lost alloc %v, the forward walk %v", got, want)
	}
	initial, err := d.Reconstruct(roundSize)
	if err != nil {
		t.Fatal(err)
	}
	f := &forwardSim{t: t, blocks: map[uint64]*simBlock{}}
	for i, e := range initial {
		if e.Flags&trace.FlagReconstructed == 0 || e.Device != d.Index {
			t.Errorf("initial %d: %+v", i, e)
		}
		if e.Kind == trace.KindAlloc && e.BlockSize < e.Size {
			t.Errorf("initial %d: block size %d < requested %d", i, e.BlockSize, e.Size)
		}
		f.apply(i, e)
	}
	// Reconstructed blocks must not overlap each other.
	var addrs []uint64
	for a := range f.blocks {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	for i := 1; i < len(addrs); i++ {
		if prev := f.blocks[addrs[i-1]]; addrs[i-1]+uint64(prev.size) > addrs[i] {
			t.Errorf("reconstructed blocks %#x (+%d) and %#x overlap", addrs[i-1], prev.size, addrs[i])
		}
	}
	for i, e := range d.Events {
		f.apply(i, e)
	}
	f.merge()
	want := &forwardSim{t: t}
	live := map[uint64]Block{}
	for _, s := range d.Segments {
		want.segs = append(want.segs, simRange{s.Addr, s.Addr + uint64(s.TotalSize), s.Stream, s.Expandable})
		for _, b := range s.Blocks {
			if b.State.Live() {
				live[b.Addr] = b
			}
		}
	}
	want.merge()
	if len(want.segs) != len(f.segs) {
		t.Errorf("forward: %d segment ranges, want %d", len(f.segs), len(want.segs))
	} else {
		for i := range f.segs {
			if f.segs[i] != want.segs[i] {
				t.Errorf("forward: segment %d %+v, want %+v", i, f.segs[i], want.segs[i])
			}
		}
	}
	if len(live) != len(f.blocks) {
		t.Errorf("forward: %d live blocks, want %d", len(f.blocks), len(live))
	}
	for a, b := range live {
		g := f.blocks[a]
		if g == nil {
			t.Errorf("forward: block %#x missing", a)
			continue
		}
		if g.req != b.RequestedSize || g.pending != (b.State == ActivePendingFree) {
			t.Errorf("forward: block %#x req %d pending %v, want %d %v", a, g.req, g.pending, b.RequestedSize, b.State)
		}
		if g.size != 0 && g.size != b.Size { // a block live from start to end keeps its exact size
			t.Errorf("forward: block %#x size %d, want %d", a, g.size, b.Size)
		}
	}
	return initial
}

// TestReconstruct_forward checks every real snapshot: the reconstructed
// start state followed by the trace ends exactly in the dumped state.
func TestReconstruct_forward(t *testing.T) {
	for _, path := range realSnapshots(t) {
		t.Run(name(path), func(t *testing.T) {
			s, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range s.Devices {
				initial := checkReconstruction(t, d)
				wrapped := strings.Contains(path, "wrap")
				if wrapped != (len(initial) > 0) || wrapped != d.Truncated {
					t.Errorf("device %d: %d initial events, truncated %v", d.Index, len(initial), d.Truncated)
				}
				for _, p := range d.Validate() {
					t.Errorf("problem: %v", p)
				}
				t.Logf("device %d: %d initial events for %d events", d.Index, len(initial), len(d.Events))
			}
		})
	}
}

// TestReconstruct_forwardCut makes wrapped histories of every real snapshot
// (expandable and private-pool ones included) by dropping the first part of
// the trace, and checks them structurally.
func TestReconstruct_forwardCut(t *testing.T) {
	for _, path := range realSnapshots(t) {
		for _, pct := range []int{1, 10, 50, 90, 99} {
			t.Run(fmt.Sprintf("%s/%d%%", name(path), pct), func(t *testing.T) {
				d := mustRead(t, path).Devices[0]
				cut := len(d.Events) * pct / 100
				if cut == 0 {
					t.Skip("trace too short to cut")
				}
				d.Events = d.Events[cut:]
				if initial := checkReconstruction(t, d); len(initial) == 0 || !d.Truncated {
					t.Errorf("%d initial events, truncated %v", len(initial), d.Truncated)
				}
				for _, p := range d.Validate() {
					t.Errorf("problem: %v", p)
				}
			})
		}
	}
}

// TestReconstruct_startStateCompact checks that the start state kept for
// Validate holds no more than its blocks: undo's table grows with the most
// blocks live at any point of the trace, and an import keeps the start
// state while its model replays the trace.
func TestReconstruct_startStateCompact(t *testing.T) {
	defer func(n int) { parallelStartMin = n }(parallelStartMin)
	parallelStartMin = 1 << 30 // undo's table
	const n = 100_000
	evs := make([]trace.Event, 0, 3*n)
	for i := range n {
		evs = append(evs, trace.Event{Kind: trace.KindAlloc, Addr: 1<<32 + uint64(i)*512, Size: 512})
	}
	for i := range n {
		a := uint64(1<<32 + i*512)
		evs = append(evs, trace.Event{Kind: trace.KindFreeRequested, Addr: a, Size: 512},
			trace.Event{Kind: trace.KindFreeCompleted, Addr: a, Size: 512})
	}
	for i := range evs {
		evs[i].Seq = int64(i)
	}
	d := &Device{Events: evs}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	initial, err := d.Reconstruct(roundSize)
	if err != nil || len(initial) != 0 {
		t.Fatalf("Reconstruct: %d events, %v; want none (the history is complete)", len(initial), err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if kept := int64(after.HeapAlloc) - int64(before.HeapAlloc); kept > 1<<20 {
		t.Errorf("the start state of an empty start keeps %d bytes; want under 1 MiB", kept)
	}
	if st, err := d.startState(); err != nil || len(st.live) != 0 {
		t.Errorf("start state: %v blocks, %v; want none", len(st.live), err)
	}
	runtime.KeepAlive(d)
}

// TestReconstruct_startMemoryPerBlock: a wrapped history's start state,
// derived on several cores (parallelStart) as an import of a file in
// memory derives it, costs about its blocks, not a table of them: at most
// 96 bytes allocated a block live at the start beside the output events
// (a table of 64-byte slots grown by doubling took over 300), and at most
// 24 bytes a block kept for Validate once the output is made (the table
// kept 85 or more).
func TestReconstruct_startMemoryPerBlock(t *testing.T) {
	defer func(n, procs int) { parallelStartMin = n; runtime.GOMAXPROCS(procs) }(parallelStartMin, runtime.GOMAXPROCS(4))
	parallelStartMin = 1
	const n = 200_000
	seg := Segment{Addr: 1 << 32, TotalSize: n * 512, Large: true, Blocks: make([]Block, n)}
	for i := range seg.Blocks {
		seg.Blocks[i] = Block{Addr: seg.Addr + uint64(i)*512, Size: 512, RequestedSize: 500, State: ActiveAllocated, Stack: trace.NoStack}
	}
	// A 64th of the blocks live at the start are freed and allocated
	// again during the trace: their start blocks come from the trace's
	// frees, the others from the end state.
	var evs []trace.Event
	for i := 0; i < n; i += 64 {
		a := seg.Addr + uint64(i)*512
		evs = append(evs, trace.Event{Kind: trace.KindFreeRequested, Addr: a, Size: 400, Stack: trace.NoStack},
			trace.Event{Kind: trace.KindFreeCompleted, Addr: a, Size: 400, Stack: trace.NoStack},
			trace.Event{Kind: trace.KindAlloc, Addr: a, Size: 500, Stack: trace.NoStack})
	}
	for i := range evs {
		evs[i].Seq = int64(i)
	}
	d := &Device{Events: evs, Segments: []Segment{seg}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	initial, err := d.Reconstruct(roundSize)
	runtime.ReadMemStats(&after)
	if err != nil || len(initial) != n+1 {
		t.Fatalf("Reconstruct: %d events, %v; want %d", len(initial), err, n+1)
	}
	out := int64(cap(initial)) * int64(unsafe.Sizeof(trace.Event{}))
	if per := (int64(after.TotalAlloc-before.TotalAlloc) - out) / n; per > 96 {
		t.Errorf("the start state allocated %d bytes a live block beside its events; want at most 96", per)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if per := (int64(after.HeapAlloc) - int64(before.HeapAlloc) - out) / n; per > 24 {
		t.Errorf("the start state kept for Validate holds %d bytes a live block; want at most 24", per)
	}
	if st, err := d.startState(); err != nil || len(st.live) != n {
		t.Errorf("start state: %d blocks, %v; want %d", len(st.live), err, n)
	}
	runtime.KeepAlive(initial)
	runtime.KeepAlive(d)
}
