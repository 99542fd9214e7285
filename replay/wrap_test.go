package replay

import (
	"cmp"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// reconstructStart rebuilds the allocator state just before the first
// retained event of a wrapped trace by undoing the trace backwards from the
// final segments (pytorch-snapshot §11.1), and returns it as the leading
// FlagReconstructed events a wrapped trace starts with.
//
// Blocks that were live at trace start and freed during it are known only by
// their requested size. Their exact size is round_size(requested), plus the
// unsplit remainder when a large-pool block was not split: large-pool blocks
// are always larger than SmallSize, so a gap of at most SmallSize after such a
// block (before the next live block or the segment end) must be its own tail.
func reconstructStart(t *testing.T, s *snapshot, conf allocator.Conf) []trace.Event {
	type seg struct {
		addr   uint64
		size   int64
		stream uint64
		small  bool
	}
	type blk struct {
		size, req int64
		pending   bool
		exact     bool
	}
	segs := map[uint64]seg{}
	live := map[uint64]blk{}
	for _, sg := range s.segments {
		if sg.Expandable {
			t.Fatal("expandable reconstruction not implemented")
		}
		segs[sg.Addr] = seg{sg.Addr, sg.Size, sg.Stream, sg.Small}
		for _, b := range sg.Blocks {
			if b.State != allocator.Inactive {
				live[b.Addr] = blk{b.Size, b.Requested, b.State == allocator.ActivePendingFree, true}
			}
		}
	}
	evs := s.events
	pairedWithNext := make([]bool, len(evs))
	for i := 0; i+1 < len(evs); i++ {
		if evs[i].Kind == trace.KindFreeRequested && evs[i+1].Kind == trace.KindFreeCompleted && evs[i+1].Addr == evs[i].Addr {
			pairedWithNext[i] = true
		}
	}
	for i := len(evs) - 1; i >= 0; i-- {
		e := &evs[i]
		switch e.Kind {
		case trace.KindAlloc:
			if _, ok := live[e.Addr]; !ok {
				t.Fatalf("undo alloc %#x at %d: no live block", e.Addr, i)
			}
			delete(live, e.Addr)
		case trace.KindFreeCompleted:
			if i > 0 && pairedWithNext[i-1] {
				live[e.Addr] = blk{size: conf.RoundSize(e.Size), req: e.Size}
				i-- // the pair's free_requested
			} else {
				live[e.Addr] = blk{size: conf.RoundSize(e.Size), req: e.Size, pending: true}
			}
		case trace.KindFreeRequested:
			b := live[e.Addr]
			b.pending = false
			live[e.Addr] = b
		case trace.KindSegmentFree:
			segs[e.Addr] = seg{e.Addr, e.Size, e.Stream, e.Size == conf.SmallBuffer}
		case trace.KindSegmentAlloc:
			delete(segs, e.Addr)
		case trace.KindSegmentMap, trace.KindSegmentUnmap:
			t.Fatal("expandable reconstruction not implemented")
		}
	}
	var out []trace.Event
	order := slices.SortedFunc(func(yield func(seg) bool) {
		for _, s := range segs {
			if !yield(s) {
				return
			}
		}
	}, func(a, b seg) int { return cmp.Compare(a.addr, b.addr) })
	for _, sg := range order {
		out = append(out, trace.Event{Kind: trace.KindSegmentAlloc, Addr: sg.addr, Size: sg.size, Stream: sg.stream,
			Stack: trace.NoStack, Flags: trace.FlagReconstructed})
		var addrs []uint64
		for a := range live {
			if a >= sg.addr && a < sg.addr+uint64(sg.size) {
				addrs = append(addrs, a)
			}
		}
		slices.Sort(addrs)
		for i, a := range addrs {
			b := live[a]
			if !b.exact && !sg.small {
				end := sg.addr + uint64(sg.size)
				if i+1 < len(addrs) {
					end = addrs[i+1]
				}
				if gap := int64(end-a) - b.size; gap > 0 && gap <= conf.SmallSize {
					b.size += gap
				}
			}
			f := trace.FlagReconstructed
			if b.pending {
				f |= trace.FlagPending
			}
			out = append(out, trace.Event{Kind: trace.KindAlloc, Addr: a, Size: b.req, BlockSize: b.size,
				Stream: sg.stream, Stack: trace.NoStack, Flags: f})
		}
	}
	return out
}

// TestSnapshotWrapped replays mlp_train__wrap1500, whose ring buffer wrapped:
// the start state is reconstructed backwards from the dump, restored, and the
// retained trace replayed forward must reproduce the dump's layout exactly,
// every recorded event, and the current stats.
func TestSnapshotWrapped(t *testing.T) {
	s := loadSnapshot(t, "mlp_train__wrap1500")
	conf, err := allocator.ParseConf(s.conf)
	if err != nil {
		t.Fatal(err)
	}
	start := reconstructStart(t, s, conf)
	if len(start) == 0 {
		t.Fatal("nothing reconstructed")
	}
	events := append(start, s.events...)
	for i := range events {
		events[i].Seq = int64(i)
	}
	d, got := replaySnapshot(t, s, events)
	n := len(start)
	diffLines(t, "all events", filterLines(events[n:], modelKind), filterLines(got, modelKind))
	for _, m := range d.Mismatches {
		t.Errorf("mismatch at event %d: %s", m.Seq, m.What)
	}
	compareSegments(t, s.segments, d.Allocator.Segments())
	// num_device_alloc: the restored segments were mallocs before the
	// history began (this run freed none, so the count is exact).
	compareStats(t, s, d.Stats.Map(), []string{"segment.all.current", "allocated_bytes.all.current", "reserved_bytes.all.current",
		"num_device_alloc", "num_device_free"})
	t.Logf("restored %d reconstructed events, replayed %d", n, d.Events)
	checkStartReported(t, events[:n], got)
}

// checkStartReported checks that a replay's observer got the reconstructed
// events it restored (start) first, as the trace has them, and that its
// whole stream is then self-consistent: every free names a block the
// stream allocated, and the allocated and reserved bytes it implies never
// go below zero. A replay that restored its start silently left the
// observer's stream freeing blocks it never saw, and `tracer replay`'s
// fragmentation came out negative.
func checkStartReported(t *testing.T, start, got []trace.Event) {
	t.Helper()
	if len(got) < len(start) {
		t.Fatalf("observer got %d events, fewer than the %d reconstructed", len(got), len(start))
	}
	for i := range start {
		w, g := start[i], got[i]
		if g.Seq != int64(i) || g.Kind != w.Kind || g.Addr != w.Addr || g.Size != w.Size || g.BlockSize != w.BlockSize ||
			g.Flags != w.Flags || g.Stack != w.Stack || g.Stream != w.Stream {
			t.Fatalf("observer event %d = %+v, want the reconstructed %+v", i, g, w)
		}
	}
	live := map[uint64]int64{}
	var allocated, reserved int64
	for i := range got {
		e := &got[i]
		switch e.Kind {
		case trace.KindAlloc:
			live[e.Addr] = e.BlockSize
			allocated += e.BlockSize
		case trace.KindFreeRequested:
			size, ok := live[e.Addr]
			if !ok {
				t.Fatalf("observer event %d frees %#x, which its stream never allocated", i, e.Addr)
			}
			delete(live, e.Addr)
			allocated -= size
		case trace.KindSegmentAlloc, trace.KindSegmentMap:
			reserved += e.Size
		case trace.KindSegmentFree, trace.KindSegmentUnmap:
			reserved -= e.Size
		}
		if allocated < 0 || reserved < 0 || allocated > reserved {
			t.Fatalf("observer event %d: allocated %d, reserved %d", i, allocated, reserved)
		}
	}
}
