package replay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// statKeys are the memory_stats() values each .stats.json holds.
var statKeys = []string{
	"reserved_bytes.all.peak", "allocated_bytes.all.peak", "active_bytes.all.peak",
	"requested_bytes.all.peak", "inactive_split_bytes.all.peak", "num_device_alloc", "num_device_free",
	"num_alloc_retries", "num_ooms", "segment.all.peak", "segment.all.current",
	"allocated_bytes.all.current", "reserved_bytes.all.current", "allocation.all.allocated",
	"oversize_allocations.peak", "oversize_segments.peak", "num_sync_all_streams",
}

func replaySnapshot(t *testing.T, s *snapshot, events []trace.Event) (*DeviceResult, []trace.Event) {
	t.Helper()
	conf, err := allocator.ParseConf(s.conf)
	if err != nil {
		t.Fatal(err)
	}
	var got []trace.Event
	res, err := Run(context.Background(), NewSliceSource(events), Options{
		Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit, Recorded: true, PrivateSegments: s.segments,
	}, ObserverFunc(func(ev *trace.Event) { got = append(got, *ev) }))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Devices) != 1 {
		t.Fatalf("%d devices replayed", len(res.Devices))
	}
	d := &res.Devices[0]
	if err := d.Allocator.CheckInvariants(); err != nil {
		t.Errorf("invariants after replay: %v", err)
	}
	return d, got
}

func eventLine(e *trace.Event) string {
	addr := fmt.Sprintf("%#x", e.Addr)
	if e.Kind == trace.KindOOM {
		addr = "-" // device_free comes from the real driver
	}
	return fmt.Sprintf("%s %s %d stream=%d", e.Kind, addr, e.Size, e.Stream)
}

func filterLines(evs []trace.Event, keep func(trace.Kind) bool) []string {
	var out []string
	for i := range evs {
		if keep(evs[i].Kind) && evs[i].Flags&trace.FlagReconstructed == 0 {
			out = append(out, eventLine(&evs[i]))
		}
	}
	return out
}

func diffLines(t *testing.T, what string, want, got []string) {
	t.Helper()
	n := min(len(want), len(got))
	for i := 0; i < n; i++ {
		if want[i] != got[i] {
			lo := max(0, i-3)
			t.Errorf("%s differ at #%d:\n recorded: %s\n replayed: %s\n context recorded: %s\n context replayed: %s",
				what, i, want[i], got[i], strings.Join(want[lo:min(len(want), i+3)], " | "), strings.Join(got[lo:min(len(got), i+3)], " | "))
			return
		}
	}
	if len(want) != len(got) {
		t.Errorf("%s: recorded %d, replayed %d", what, len(want), len(got))
	}
}

func segKind(k trace.Kind) bool {
	return k == trace.KindSegmentAlloc || k == trace.KindSegmentFree || k == trace.KindSegmentMap || k == trace.KindSegmentUnmap
}

func modelKind(k trace.Kind) bool { return k != trace.KindSnapshot }

func compareSegments(t *testing.T, want, got []allocator.SegmentInfo) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("final layout: %d segments recorded, %d replayed", len(want), len(got))
	}
	for i := 0; i < min(len(want), len(got)); i++ {
		w, g := want[i], got[i]
		if w.Addr != g.Addr || w.Size != g.Size || w.Stream != g.Stream || w.Pool != g.Pool || w.Small != g.Small || w.Expandable != g.Expandable {
			t.Errorf("segment %d: recorded %#x size %d stream %d pool %v small %v exp %v; replayed %#x size %d stream %d pool %v small %v exp %v",
				i, w.Addr, w.Size, w.Stream, w.Pool, w.Small, w.Expandable, g.Addr, g.Size, g.Stream, g.Pool, g.Small, g.Expandable)
			continue
		}
		if !slices.Equal(w.Blocks, g.Blocks) {
			t.Errorf("segment %#x blocks:\n recorded %+v\n replayed %+v", w.Addr, w.Blocks, g.Blocks)
		}
	}
}

func compareStats(t *testing.T, s *snapshot, got map[string]int64, keys []string) {
	t.Helper()
	for _, k := range keys {
		w, ok := s.stats[k].(float64)
		if !ok {
			t.Errorf("stats.json lacks %s", k)
			continue
		}
		if int64(w) != got[k] {
			t.Errorf("%s: recorded %d, replayed %d", k, int64(w), got[k])
		}
	}
}

// TestSnapshots replays every snapshot recorded from the start under its own
// settings and memory limit and checks the replay against the recording
// event for event, the final layout block for block, and the stats exactly.
func TestSnapshots(t *testing.T) {
	for _, name := range snapshotNames(t) {
		if strings.Contains(name, "wrap") {
			continue // TestSnapshotWrapped
		}
		t.Run(name, func(t *testing.T) {
			s := loadSnapshot(t, name)
			d, got := replaySnapshot(t, s, s.events)
			diffLines(t, "segment events", filterLines(s.events, segKind), filterLines(got, segKind))
			diffLines(t, "all events", filterLines(s.events, modelKind), filterLines(got, modelKind))
			for _, m := range d.Mismatches {
				t.Errorf("mismatch at recorded event %d: %s", m.Seq, m.What)
			}
			compareSegments(t, s.segments, d.Allocator.Segments())
			compareStats(t, s, d.Stats.Map(), statKeys)
			t.Logf("%d events, %d OOMs, %d empty_cache, peak reserved %d", d.Events, len(d.OOMs), d.EmptyCaches, d.Stats.ReservedBytes[0].Peak)
		})
	}
}

// TestSnapshots_wrongConf shows the differential check has teeth: replaying
// the roundup_power2_divisions:8 recording under the default settings while
// claiming they are the recorded ones must report mismatches.
func TestSnapshots_wrongConf(t *testing.T) {
	s := loadSnapshot(t, "attention_infer__pow2div8")
	res, err := Run(context.Background(), NewSliceSource(s.events), Options{
		Conf: allocator.DefaultConf(), TotalMemory: s.total, Recorded: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Devices[0]; d.NumMismatches == 0 || len(d.Mismatches) == 0 {
		t.Fatal("no mismatch reported for a replay under the wrong settings")
	}
	// SkipCompare takes the recording's addresses and compares nothing.
	res, err = Run(context.Background(), NewSliceSource(s.events), Options{
		Conf: allocator.DefaultConf(), TotalMemory: s.total, Recorded: true, SkipCompare: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Devices[0]; d.NumMismatches != 0 || len(d.Mismatches) != 0 {
		t.Fatalf("SkipCompare reported %d mismatches", d.NumMismatches)
	}
}

// TestSnapshots_otherConf replays each recording under other settings (no
// address plan, no comparison): it must run to the end with consistent state.
func TestSnapshots_otherConf(t *testing.T) {
	confs := []string{"", "expandable_segments:True", "max_split_size_mb:20", "roundup_power2_divisions:[1:1,64:4,>:8]",
		"expandable_segments:True,max_split_size_mb:40", "garbage_collection_threshold:0.5", "large_segment_size_mb:64"}
	for _, name := range snapshotNames(t) {
		s := loadSnapshot(t, name)
		if strings.Contains(name, "wrap") {
			continue
		}
		for _, cs := range confs {
			conf, err := allocator.ParseConf(cs)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), NewSliceSource(s.events), Options{
				Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit,
			}, nil)
			if err != nil {
				t.Fatalf("%s under %q: %v", name, cs, err)
			}
			d := res.Devices[0]
			if err := d.Allocator.CheckInvariants(); err != nil {
				t.Errorf("%s under %q: %v", name, cs, err)
			}
			t.Logf("%s under %q: peak reserved %d MiB, OOMs %d (avoided %d)", name, cs,
				d.Stats.ReservedBytes[0].Peak>>20, len(d.OOMs), d.AvoidedOOMs)
		}
	}
}

// TestAnnotate checks Options.Annotate against what the model reports to
// an observer. On every snapshot recorded from its start, replayed under
// its own settings (where the model reproduces it), each recorded alloc
// must get the block size of the model's alloc at its place in the order of
// allocs, and each free the size of the model's live block at its address;
// Left is never called, and the replay's result does not change. Under
// settings that make the model leave the recording, Left is called once,
// at the first recorded alloc the model puts elsewhere or cannot make (or
// a recorded OOM it satisfies), and nothing after it is annotated.
func TestAnnotate(t *testing.T) {
	left := 0
	for _, name := range snapshotNames(t) {
		if strings.Contains(name, "wrap") {
			continue // starts mid-run: no Recorded replay of these events alone
		}
		s := loadSnapshot(t, name)
		for _, cs := range []string{s.conf, "roundup_power2_divisions:4"} {
			conf, err := allocator.ParseConf(cs)
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit, Recorded: true, SkipCompare: true,
				PrivateSegments: s.segments}
			// The oracle: the model's allocs, observed, matched in order
			// with the recorded ones while their addresses agree.
			var allocs []trace.Event
			plain, err := Run(context.Background(), NewSliceSource(s.events), opts,
				ObserverFunc(func(ev *trace.Event) {
					if ev.Kind == trace.KindAlloc {
						allocs = append(allocs, *ev)
					}
				}))
			if err != nil {
				t.Fatal(err)
			}
			want := append([]trace.Event(nil), s.events...)
			wantLeft := -1
			sizeAt := map[uint64]int64{}
			k := 0
			for i := range want {
				ev := &want[i]
				if ev.Kind == trace.KindAlloc || ev.Kind == trace.KindOOM {
					// The oracle's model made an alloc for this request if
					// its next alloc is at this address, for an alloc; an
					// OOM the model satisfies shows as an alloc too.
					if ev.Kind == trace.KindOOM {
						if k < len(allocs) && allocs[k].Size == ev.Size && plain.Devices[0].AvoidedOOMs > 0 {
							wantLeft = i
							break
						}
						continue
					}
					if k >= len(allocs) || allocs[k].Addr != ev.Addr {
						wantLeft = i
						break
					}
					ev.BlockSize = allocs[k].BlockSize
					sizeAt[ev.Addr] = ev.BlockSize
					k++
				}
				switch ev.Kind {
				case trace.KindFreeRequested:
					ev.BlockSize = sizeAt[ev.Addr]
				case trace.KindFreeCompleted:
					ev.BlockSize = sizeAt[ev.Addr]
					delete(sizeAt, ev.Addr)
				}
			}
			got := append([]trace.Event(nil), s.events...)
			var leftAt []int64
			opts.Annotate = true
			opts.Left = func(ev *trace.Event) { leftAt = append(leftAt, ev.Seq) }
			res, err := Run(context.Background(), NewSliceSource(got), opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			d, p := res.Devices[0], plain.Devices[0]
			if d.Stats != p.Stats || d.Events != p.Events || d.EmptyCaches != p.EmptyCaches || len(d.OOMs) != len(p.OOMs) {
				t.Errorf("%s under %q: Annotate changed the replay's result", name, cs)
			}
			switch {
			case wantLeft < 0 && len(leftAt) != 0:
				t.Errorf("%s under %q: Left called at %v; the model reproduces the recording", name, cs, leftAt)
			case wantLeft >= 0 && (len(leftAt) != 1 || leftAt[0] != want[wantLeft].Seq):
				t.Errorf("%s under %q: Left called at %v, want once at seq %d", name, cs, leftAt, want[wantLeft].Seq)
			}
			if wantLeft >= 0 {
				left++
				// Past the point of leaving, the oracle loop stopped: nothing
				// there may be annotated.
				for i := range want[wantLeft:] {
					want[wantLeft+i].BlockSize = 0
				}
			}
			sized := 0
			for i := range want {
				if got[i].BlockSize != want[i].BlockSize {
					t.Fatalf("%s under %q: event %d (%s %#x): block size %d, want %d", name, cs, i, want[i].Kind, want[i].Addr, got[i].BlockSize, want[i].BlockSize)
				}
				if got[i].BlockSize > 0 {
					sized++
				}
			}
			if cs == s.conf && (wantLeft >= 0 || sized == 0) {
				t.Errorf("%s: under its own settings the model left at %d, %d events annotated", name, wantLeft, sized)
			}
		}
	}
	if left == 0 {
		t.Errorf("no replay left the recording: Left is unchecked")
	}
}
