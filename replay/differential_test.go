package replay

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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

// modelKind: the allocator's events. A replay's empty_cache rows are
// requests, which a recording does not hold.
func modelKind(k trace.Kind) bool { return k != trace.KindSnapshot && k != trace.KindEmptyCache }

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
// an observer (checkAnnotate). On every snapshot recorded from its start,
// replayed under its own settings (where the model reproduces it), every
// recorded alloc and free must get its block size and Left is never
// called; under settings that make the model leave the recording, Left is
// called once, where the oracle says, and nothing after it is annotated.
// Numbered, most events under the own settings take the calm runs'
// annotating loop (bareAnnotated), with the same sizes.
func TestAnnotate(t *testing.T) {
	left := 0
	var own, bare int64
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
			wantLeft, sized, b := checkAnnotate(t, name+" under "+strconv.Quote(cs), s.events, opts)
			if wantLeft >= 0 {
				left++
			}
			if cs == s.conf {
				own, bare = own+int64(len(s.events)), bare+b
			}
			if cs == s.conf && (wantLeft >= 0 || sized == 0) {
				t.Errorf("%s: under its own settings the model left at %d, %d events annotated", name, wantLeft, sized)
			}
		}
	}
	if left == 0 {
		t.Errorf("no replay left the recording: Left is unchecked")
	}
	if bare < own/2 {
		t.Errorf("under their own settings %d of %d events took bareAnnotated, want at least half", bare, own)
	}
}

// checkAnnotate replays events with opts and Annotate, and checks the block
// sizes written and the calls of Left against an oracle: the model's allocs
// as an observer of a plain replay sees them, matched in order with the
// recorded allocs while their addresses agree (an OOM the model satisfies
// shows as an extra alloc), each free getting the size of the model's live
// block at its address. It returns the index of the event where the model
// left the recording (-1 if none), and how many events were annotated.
// It checks the replay with the events numbered too (Options.Numbered,
// whose calm runs annotate in bareAnnotated), and returns how many events
// bareAnnotated replayed there.
func checkAnnotate(t *testing.T, what string, events []trace.Event, opts Options) (int, int, int64) {
	t.Helper()
	var allocs []trace.Event
	plain, err := Run(context.Background(), NewSliceSource(events), opts,
		ObserverFunc(func(ev *trace.Event) {
			if ev.Kind == trace.KindAlloc && ev.Flags&trace.FlagReconstructed == 0 {
				allocs = append(allocs, *ev)
			}
		}))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want := append([]trace.Event(nil), events...)
	wantLeft := -1
	sizeAt := map[uint64]int64{}
	k := 0
	for i := range want {
		ev := &want[i]
		if ev.Kind == trace.KindOOM {
			if k < len(allocs) && allocs[k].Size == ev.Size && plain.Devices[0].AvoidedOOMs > 0 {
				wantLeft = i
				break
			}
			continue
		}
		switch ev.Kind {
		case trace.KindAlloc:
			if k >= len(allocs) || allocs[k].Addr != ev.Addr {
				wantLeft = i
			} else {
				ev.BlockSize = allocs[k].BlockSize
				sizeAt[ev.Addr] = ev.BlockSize
				k++
			}
		case trace.KindFreeRequested:
			ev.BlockSize = sizeAt[ev.Addr]
		case trace.KindFreeCompleted:
			ev.BlockSize = sizeAt[ev.Addr]
			delete(sizeAt, ev.Addr)
		}
		if wantLeft >= 0 {
			break
		}
	}
	if wantLeft >= 0 {
		for i := range want[wantLeft:] {
			want[wantLeft+i].BlockSize = events[wantLeft+i].BlockSize // as recorded: nothing written
		}
	}
	got := append([]trace.Event(nil), events...)
	var leftAt []int64
	opts.Annotate = true
	opts.Left = func(ev *trace.Event) { leftAt = append(leftAt, ev.Seq) }
	res, err := Run(context.Background(), NewSliceSource(got), opts, nil)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	d, p := res.Devices[0], plain.Devices[0]
	if d.Stats != p.Stats || d.Events != p.Events || d.EmptyCaches != p.EmptyCaches || len(d.OOMs) != len(p.OOMs) {
		t.Errorf("%s: Annotate changed the replay's result", what)
	}
	switch {
	case wantLeft < 0 && len(leftAt) != 0:
		t.Errorf("%s: Left called at %v; the model reproduces the recording", what, leftAt)
	case wantLeft >= 0 && (len(leftAt) != 1 || leftAt[0] != want[wantLeft].Seq):
		t.Errorf("%s: Left called at %v, want once at seq %d", what, leftAt, want[wantLeft].Seq)
	}
	sized := 0
	for i := range want {
		if got[i].BlockSize != want[i].BlockSize {
			t.Fatalf("%s: event %d (%s %#x): block size %d, want %d", what, i, want[i].Kind, want[i].Addr, got[i].BlockSize, want[i].BlockSize)
		}
		if got[i].BlockSize > 0 && events[i].BlockSize == 0 {
			sized++
		}
	}
	numbered := append([]trace.Event(nil), events...)
	numberInParts(numbered, 1, 1024)
	opts.Numbered = true
	var leftNumbered []int64
	opts.Left = func(ev *trace.Event) { leftNumbered = append(leftNumbered, ev.Seq) }
	var rp Replayer
	if _, err := rp.Run(context.Background(), NewSliceSource(numbered), opts, nil); err != nil {
		t.Fatalf("%s, numbered: %v", what, err)
	}
	if !slices.Equal(leftNumbered, leftAt) {
		t.Errorf("%s, numbered: Left called at %v, unnumbered at %v", what, leftNumbered, leftAt)
	}
	for i := range want {
		if numbered[i].BlockSize != want[i].BlockSize {
			t.Fatalf("%s, numbered: event %d (%s %#x): block size %d, want %d", what, i, want[i].Kind, want[i].Addr, numbered[i].BlockSize, want[i].BlockSize)
		}
	}
	return wantLeft, sized, rp.x.dev0.annotatedBare
}

// FuzzAnnotate records a random request stream on the allocator under one
// setting (allocs of random sizes on two streams, frees, frees that wait
// for another stream, empty_cache), and annotates the recording under that
// setting and another (checkAnnotate): the first must annotate everything,
// the second what the oracle says.
func FuzzAnnotate(f *testing.F) {
	f.Add([]byte{0x10, 0x80, 0x21, 0x03, 0xf0, 0x44, 0x91, 0x12, 0x33, 0x5a, 0xc3, 0x07}, uint8(0), uint8(1))
	f.Add([]byte("a few bytes of requests, frees and cross-stream frees"), uint8(2), uint8(3))
	confs := []string{"", "roundup_power2_divisions:4", "max_split_size_mb:20", "garbage_collection_threshold:0.5",
		"roundup_power2_divisions:[256:1,512:2,>:8]"}
	f.Fuzz(func(t *testing.T, ops []byte, c1, c2 uint8) {
		if len(ops) > 4096 {
			ops = ops[:4096]
		}
		recConf, err := allocator.ParseConf(confs[int(c1)%len(confs)])
		if err != nil {
			t.Fatal(err)
		}
		const total = 4 << 30
		limit := int64(3 << 30)
		if recConf.GCThreshold == 0 {
			limit = 0
		}
		events := recordOps(t, ops, recConf, total, limit)
		if len(events) == 0 {
			return
		}
		for _, cs := range []string{confs[int(c1)%len(confs)], confs[int(c2)%len(confs)]} {
			conf, err := allocator.ParseConf(cs)
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{Conf: conf, TotalMemory: total, MemoryLimit: limit, Recorded: true, SkipCompare: true}
			wantLeft, _, _ := checkAnnotate(t, strconv.Quote(cs), events, opts)
			if cs == confs[int(c1)%len(confs)] && wantLeft >= 0 {
				t.Fatalf("under its own settings %q the model left its recording at event %d", cs, wantLeft)
			}
		}
	})
}

// recordOps runs the requests ops encode on an allocator under conf and
// returns what it emitted, as a recording: each pair of bytes is a request
// (an alloc of a size drawn from the second byte on stream 0 or 1, a free
// of a live block, a free that waits for another stream, or empty_cache).
func recordOps(t *testing.T, ops []byte, conf allocator.Conf, total, limit int64) []trace.Event {
	t.Helper()
	if limit > 0 {
		conf.MemoryFraction = 1
	}
	a, err := allocator.New(conf, allocator.NewSimDevice(total))
	if err != nil {
		t.Fatal(err)
	}
	if limit > 0 {
		a.SetMemoryLimit(limit)
	}
	var evs []trace.Event
	a.SetObserver(allocator.ObserverFunc(func(e *allocator.Event) {
		evs = append(evs, trace.Event{Seq: int64(len(evs)), Kind: KindOf(e.Action), Addr: e.Addr, Size: e.Size,
			Stream: e.Stream, Stack: trace.NoStack})
	}))
	var live []uint64
	var pending []uint64
	for i := 0; i+1 < len(ops); i += 2 {
		op, arg := ops[i], ops[i+1]
		switch {
		case op < 150 || len(live) == 0: // alloc: 1 B to about 100 MiB, skewed small
			size := int64(1) << (arg % 27)
			size += int64(arg) * 977 % size
			addr, err := a.Malloc(size, uint64(op&1))
			if err != nil {
				if allocator.IsOOM(err) {
					continue
				}
				t.Fatal(err)
			}
			live = append(live, addr)
		case op < 220: // free
			j := int(arg) % len(live)
			addr := live[j]
			live = slices.Delete(live, j, j+1)
			if err := a.Free(addr); err != nil {
				t.Fatal(err)
			}
		case op < 245: // a free that waits for another stream, completed at the next one of these
			j := int(arg) % len(live)
			addr := live[j]
			live = slices.Delete(live, j, j+1)
			if err := a.RecordStream(addr, 7); err != nil {
				t.Fatal(err)
			}
			if err := a.Free(addr); err != nil {
				t.Fatal(err)
			}
			if len(pending) > 0 {
				a.MarkEventsDone(pending[0])
				a.ProcessEvents()
				pending = pending[1:]
			}
			pending = append(pending, addr)
		default:
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return evs
}
