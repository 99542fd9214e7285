package record

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// The streaming import (a spill, passes a chunk at a time, the stream
// writer) writes the same bytes, and finds the same problems, as the import
// it replaced, which held every event in memory (importInMemory, below, is
// that import as it was), for every snapshot in testdata/snapshots; and so
// does the import of a snapshot decoded in memory (a file over streamMax
// on many cores: ReadFileMappedIn and the spilled import's passes and
// writer; over 64 MiB, ReadFileMapped, the chunked passes and Create's
// writer).
func TestImportStreamMatchesInMemory(t *testing.T) {
	t.Run("spill", func(t *testing.T) { testImportMatches(t) })
	for _, scratch := range []bool{true, false} {
		t.Run(fmt.Sprintf("in-memory, records in a scratch file %v", scratch), func(t *testing.T) {
			decodeInMemory(t, scratch)
			testImportMatches(t)
		})
	}
}

// decodeInMemory has the test's imports decode every file in memory (on 4
// cores), its packed records in a scratch file if scratch, else in the
// mapping.
func decodeInMemory(t *testing.T, scratch bool) {
	max, procs, scr := streamMax, runtime.GOMAXPROCS(4), recordsInScratch
	t.Cleanup(func() {
		streamMax, recordsInScratch = max, scr
		runtime.GOMAXPROCS(procs)
	})
	streamMax, recordsInScratch = -1, scratch
}

func testImportMatches(t *testing.T) {
	ins, err := filepath.Glob("../testdata/snapshots/*.pickle")
	if err != nil || len(ins) == 0 {
		t.Fatalf("no snapshots in ../testdata/snapshots (%v)", err)
	}
	dir := t.TempDir()
	spilled := 0
	defer func() {
		if streamMax < 0 && recordsInScratch && spilled == 0 {
			t.Errorf("no snapshot decoded in memory had its records in a scratch file")
		}
	}()
	for _, in := range ins {
		want, got := filepath.Join(dir, "want.arrows"), filepath.Join(dir, "got.arrows")
		wres, err := importInMemory(in, want, ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gres, err := importOne(context.Background(), in, got, ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Decoded in memory with a scratch file, a snapshot too small to
		// have its events mapped is not spilled.
		if snap, err := openSnapshot(in, dir, fileSize(in), nil, nil); err != nil || (streamMax >= 0 || !recordsInScratch) && snap.Spilled() != (streamMax >= 0) {
			t.Fatalf("%s: openSnapshot: spilled %v, error %v", in, snap != nil && snap.Spilled(), err)
		} else {
			if snap.Spilled() {
				spilled++
			}
			snap.Close()
		}
		a, _ := os.ReadFile(want)
		b, _ := os.ReadFile(got)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the streaming import wrote %d bytes that differ from the in-memory import's %d", in, len(b), len(a))
		}
		if len(gres.Problems) != len(wres.Problems) || gres.Events != wres.Events || gres.Reconstructed != wres.Reconstructed ||
			!slices.Equal(gres.Diverged, wres.Diverged) || gres.InferredLimit != wres.InferredLimit {
			t.Errorf("%s: result %+v, in memory %+v", in, gres, wres)
		}
		for i := range min(len(gres.Problems), len(wres.Problems)) {
			if gres.Problems[i].String() != wres.Problems[i].String() {
				t.Errorf("%s: problem %q, in memory %q", in, gres.Problems[i], wres.Problems[i])
			}
		}
	}
}

func importInMemory(in, out string, opts ImportOptions) (*ImportResult, error) {
	snap, err := torchsnap.ReadFile(in)
	if err != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	conf, err := allocator.ParseConf(snap.Settings.AllocConf)
	if err != nil {
		return nil, fmt.Errorf("import %s: recorded PYTORCH_CUDA_ALLOC_CONF %q: %v", in, snap.Settings.AllocConf, err)
	}
	res := &ImportResult{In: in, Out: out, Devices: len(snap.Devices), Skipped: map[string]int{}}
	meta := importMeta(in, snap, opts)
	// The recorded part of inferLimit's scan runs beside reconstruction.
	scans := make(chan []reservedScan, 1)
	go func() {
		out := make([]reservedScan, len(snap.Devices))
		for i, d := range snap.Devices {
			out[i] = scanReserved(d.Events)
		}
		scans <- out
	}()
	// Reconstruct first: the metadata records whether the history is complete.
	initial := make([][]trace.Event, len(snap.Devices))
	for i, d := range snap.Devices {
		initial[i], err = d.Reconstruct(conf.RoundSize)
		if err != nil {
			return nil, fmt.Errorf("import %s: device %d: %v", in, d.Index, err)
		}
		if len(initial[i]) > 0 {
			meta.Truncated = true
		}
		for k, n := range d.Skipped {
			res.Skipped[k] += n
		}
	}
	res.Truncated = meta.Truncated
	recorded := <-scans
	for _, d := range snap.Devices {
		tagPools(d.Events, privateSegments(d))
	}
	// Validation (warnings only) runs beside the rest, on another core. It
	// reuses the start states Reconstruct derived.
	problems := make(chan []torchsnap.Problem, 1)
	go func() {
		var all []torchsnap.Problem
		for _, d := range snap.Devices {
			all = append(all, d.Validate()...)
		}
		problems <- all
	}()
	defer func() { res.Problems = <-problems }()
	if meta.MemoryLimit == 0 {
		if limit := inferLimit(initial, recorded); limit > 0 {
			meta.MemoryLimit = limit
			meta.Extra["memory_limit"] = "inferred: the recording's peak reserved, the smallest limit consistent with its OOMs"
			res.InferredLimit = limit
		}
	}
	// The empty_cache rows the import adds; the events written are evs.
	meta.EmptyCacheRows = true
	meta.Extra["empty_cache"] = "inferred: the allocator model, replaying the recording under its settings, decided which segment releases were empty_cache() calls"
	evs := make([][]trace.Event, len(snap.Devices))
	for i, d := range snap.Devices {
		if evs[i], err = withObservedEmptyCaches(conf, meta.MemoryLimit, initial[i], d.Events); err != nil {
			return nil, err
		}
	}
	var total int64
	for i := range snap.Devices {
		total += int64(len(initial[i]) + len(evs[i]))
	}
	w, err := trace.Create(out, meta, trace.WriterOptions{Events: total})
	if err != nil {
		return nil, err
	}
	ids := make([]trace.StackID, len(snap.Stacks))
	for i, st := range snap.Stacks {
		ids[i] = w.AddStack(st)
	}
	var stackMap []trace.StackID // nil: the writer's stack ids are the snapshot's (the usual case)
	for i, id := range ids {
		if id != trace.StackID(i) {
			stackMap = ids
			break
		}
	}
	write := func(evs []trace.Event) error { return w.WriteEvents(evs, stackMap) }
	for i, d := range snap.Devices {
		if err := write(initial[i]); err != nil {
			w.Abort()
			return nil, fmt.Errorf("import %s: %v", in, err)
		}
		res.Reconstructed += int64(len(initial[i]))
		base := w.Events()
		// The model annotates block sizes while the writer follows behind it.
		progress := make(chan int, 64)
		var at int
		var annErr error
		go func() {
			at, annErr = annotateInMemory(conf, meta.MemoryLimit, initial[i], evs[i], progress)
			close(progress)
		}()
		done := 0
		for upTo := range progress {
			if err == nil {
				err = write(evs[i][done:upTo])
			}
			done = upTo
		}
		if err == nil {
			err = annErr
		}
		if err == nil {
			err = write(evs[i][done:])
		}
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("import %s: device %d: %v", in, d.Index, err)
		}
		if at >= 0 {
			dv := Divergence{Device: d.Index, Seq: base + int64(at)}
			if at < len(evs[i]) {
				dv.Addr, dv.Size = evs[i][at].Addr, evs[i][at].Size
			}
			res.Diverged = append(res.Diverged, dv)
		}
	}
	res.Events = w.Events()
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("import %s: %v", in, err)
	}
	return res, nil
}

// withObservedEmptyCaches returns a copy of events with the empty_cache
// rows the import writes, found another way than the import's: the rows an
// observer of a replay under the recorded settings sees, each put before the
// recorded release that matches the next release the observer sees (the
// model reproduces the recording).
func withObservedEmptyCaches(conf allocator.Conf, limit int64, initial, events []trace.Event) ([]trace.Event, error) {
	var releases []int // indices of the recorded releases, in order
	for i := range events {
		if k := events[i].Kind; k == trace.KindSegmentFree || k == trace.KindSegmentUnmap {
			releases = append(releases, i)
		}
	}
	before := map[int]trace.Event{} // release index → row
	seen, pending := 0, []trace.Event(nil)
	obs := replay.ObserverFunc(func(ev *trace.Event) {
		switch ev.Kind {
		case trace.KindEmptyCache:
			pending = append(pending, *ev)
		case trace.KindSegmentFree, trace.KindSegmentUnmap:
			if len(pending) > 0 && seen < len(releases) {
				before[releases[seen]] = pending[0]
				pending = pending[1:]
			}
			seen++
		}
	})
	src := append(append([]trace.Event(nil), initial...), events...)
	if _, err := replay.Run(context.Background(), replay.NewSliceSource(src), replay.Options{Conf: conf, MemoryLimit: limit,
		Recorded: true, SkipCompare: true}, obs); err != nil {
		return nil, err
	}
	out := make([]trace.Event, 0, len(events)+len(before))
	for i, ev := range events {
		if row, ok := before[i]; ok {
			row.Seq, row.Device, row.Stream = 0, ev.Device, 0
			out = append(out, row)
		}
		out = append(out, ev)
	}
	return out, nil
}

// annotateInMemory is annotateBlockSizes as 4eee959 had it: it fills Event.BlockSize of the recorded allocs and frees,
// which PyTorch does not record, from a replay of the recording under its own
// settings on the allocator model: while the model reproduces the recording
// (each replayed block at its recorded address), each of its blocks is the
// recorded block. It stops annotating at the first disagreement. It sends on
// progress how many of events are final, in order, so a writer can follow,
// and returns the index of the recorded alloc where the model left the
// recording (placed elsewhere, or not made; len(events) for an alloc the
// recording does not have), or -1. 4eee959 returned the replay's mismatch
// count instead, a comparison the import no longer makes.
func annotateInMemory(conf allocator.Conf, limit int64, initial, events []trace.Event, progress chan<- int) (int, error) {
	sizeAt := make(map[uint64]int64, 1024)
	for _, ev := range initial {
		if ev.Kind == trace.KindAlloc {
			sizeAt[ev.Addr] = ev.BlockSize
		}
	}
	next, agree := 0, true
	const step = 4096
	// advance annotates the frees before the next recorded alloc.
	advance := func() {
		for ; next < len(events) && events[next].Kind != trace.KindAlloc; next++ {
			ev := &events[next]
			switch ev.Kind {
			case trace.KindFreeRequested:
				ev.BlockSize = sizeAt[ev.Addr]
			case trace.KindFreeCompleted:
				ev.BlockSize = sizeAt[ev.Addr]
				delete(sizeAt, ev.Addr)
			}
		}
	}
	obs := replay.ObserverFunc(func(ev *trace.Event) {
		if !agree || ev.Kind != trace.KindAlloc || ev.Flags&trace.FlagReconstructed != 0 {
			return
		}
		advance()
		if next >= len(events) || events[next].Addr != ev.Addr {
			agree = false // the model left the recording: sizes unknown from here
			return
		}
		events[next].BlockSize = ev.BlockSize
		sizeAt[ev.Addr] = ev.BlockSize
		if next++; next%step == 0 {
			progress <- next
		}
	})
	// Once the model has left the recording nothing more can be annotated:
	// stop the replay there.
	src := &untilSourceMem{Source: &concatSourceMem{parts: [][]trace.Event{initial, events}}, ok: &agree}
	if _, err := replay.Run(context.Background(), src, replay.Options{Conf: conf, MemoryLimit: limit, Recorded: true}, obs); err != nil {
		return -1, err
	}
	if agree {
		advance()
	}
	if !agree || next < len(events) {
		return next, nil
	}
	return -1, nil
}

// untilSourceMem ends a Source as soon as *ok turns false.
type untilSourceMem struct {
	replay.Source
	ok *bool
}

func (u *untilSourceMem) Next() bool { return *u.ok && u.Source.Next() }

// concatSourceMem yields the events of several slices in turn, without copying
// them into one (a large snapshot's events are hundreds of MB).
type concatSourceMem struct {
	parts [][]trace.Event
	i     int
}

func (c *concatSourceMem) Next() bool {
	for len(c.parts) > 0 {
		if c.i < len(c.parts[0]) {
			c.i++
			return true
		}
		c.parts, c.i = c.parts[1:], 0
	}
	return false
}

func (c *concatSourceMem) Event() *trace.Event { return &c.parts[0][c.i-1] }
func (c *concatSourceMem) Err() error          { return nil }

// A failed import leaves no output and no spill file: the spill, made in
// the output's directory, is unlinked as soon as it is created, so not even
// a running import has one to see.
func TestImportSpillLeavesNothing(t *testing.T) {
	tmp, out := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	data, err := os.ReadFile("../testdata/snapshots/mlp_train__wrap1500.pickle")
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(out, "cut.pickle")
	if err := os.WriteFile(in, data[:len(data)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportSnapshots(context.Background(), []string{in}, ImportOptions{Out: filepath.Join(out, "cut.arrows")}); err == nil {
		t.Fatal("a cut snapshot imported without an error")
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("the failed import left %v in TMPDIR", ents)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Errorf("the failed import left %v beside its input", ents)
	}
	spillDir := t.TempDir()
	snap, err := torchsnap.Open("../testdata/snapshots/mlp_train__wrap1500.pickle", spillDir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	for _, dir := range []string{tmp, spillDir} {
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("an open snapshot's spill is visible in %s: %v", dir, ents)
		}
	}
	if snap.Devices[0].Len() == 0 || snap.Devices[0].Events != nil {
		t.Errorf("Open: %d events, %d in memory", snap.Devices[0].Len(), len(snap.Devices[0].Events))
	}
}

// countBits agrees with a bit-by-bit count on every range of a random set.
func TestCountBits(t *testing.T) {
	x := uint64(0x9e3779b97f4a7c15)
	bits := make([]uint64, 5)
	for i := range bits {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		bits[i] = x
	}
	for lo := int64(0); lo <= 320; lo++ {
		for hi := lo; hi <= 320; hi++ {
			want := 0
			for k := lo; k < hi; k++ {
				if bits[k/64]&(1<<(k%64)) != 0 {
					want++
				}
			}
			if got := countBits(bits, lo, hi); got != want {
				t.Fatalf("countBits(%d, %d) = %d, want %d", lo, hi, got, want)
			}
		}
	}
}

// An import that decodes a file in memory with its records in the mapping
// (a file over torchsnap.ScratchMax) collects garbage at GOGC=25 while it
// runs; one through the spill, or in memory with its records in a scratch
// file, at 200 (paceDecode sets the decode's own); each gives the setting
// back after; with GOGC set in the environment, both leave it alone.
func TestImportGCPercent(t *testing.T) {
	in := "../testdata/snapshots/mlp_train__default.pickle"
	defer func(max int64, procs int, scratch bool) {
		streamMax, recordsInScratch = max, scratch
		runtime.GOMAXPROCS(procs)
	}(streamMax, runtime.GOMAXPROCS(4), recordsInScratch)
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		max      int64
		scratch  bool
		inMemory bool
		want     int
	}{{-1, false, true, 25}, {-1, true, true, 200}, {1 << 40, true, false, 200}} {
		streamMax, recordsInScratch = tc.max, tc.scratch
		if got := decodesInMemory([]string{in}); got != tc.inMemory {
			t.Fatalf("streamMax %d: decodesInMemory %v, want %v", tc.max, got, tc.inMemory)
		}
		var during int
		snapHook = func() { during = debug.SetGCPercent(-1); debug.SetGCPercent(during) }
		if _, err := ImportSnapshots(context.Background(), []string{in}, ImportOptions{Out: filepath.Join(t.TempDir(), "o.arrows")}); err != nil {
			t.Fatal(err)
		}
		snapHook = nil
		want := 100
		if os.Getenv("GOGC") == "" {
			want = tc.want
		}
		if during != want {
			t.Errorf("streamMax %d, records in a scratch file %v: GOGC %d during the import, want %d", tc.max, tc.scratch, during, want)
		}
		if after := debug.SetGCPercent(100); after != 100 {
			t.Errorf("streamMax %d: GOGC %d after the import, want it restored to 100", tc.max, after)
		}
	}
}

// TestImportFollowed: an import of a one-device snapshot takes its start
// state from the follower (no pass over the events before the annotation):
// spilled, and decoded in memory where its events are packed (its records
// in a scratch file or in the mapping); and it writes the same trace,
// warnings and result as an import that reads its events back for them
// (noFollow), for every real snapshot, the wrapped one among them.
// (torchsnap's TestForward_matchesUndo checks the start state itself on
// histories cut anywhere.)
func TestImportFollowed(t *testing.T) {
	t.Run("spill", func(t *testing.T) { testImportFollowed(t, false) })
	for _, scratch := range []bool{true, false} {
		t.Run(fmt.Sprintf("in memory, records in a scratch file %v", scratch), func(t *testing.T) {
			decodeInMemory(t, scratch)
			testImportFollowed(t, true)
		})
	}
}

func testImportFollowed(t *testing.T, inMemory bool) {
	ins, err := filepath.Glob("../testdata/snapshots/*.pickle")
	if err != nil || len(ins) == 0 {
		t.Fatalf("no snapshots: %v", err)
	}
	followedAny := false
	for _, in := range ins {
		t.Run(snapshotName(in), func(t *testing.T) {
			dir := t.TempDir()
			snap, err := openSnapshot(in, filepath.Join(dir, "probe.arrows"), fileSize(in), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Decoded in memory, a file too small for its events to be
			// packed (torchsnap's sizeFor) has nothing to follow.
			followable := len(snap.Devices) == 1 && (!inMemory || snap.Devices[0].Events == nil)
			snap.Close()
			var followed []bool
			followHook = func(f bool) { followed = append(followed, f) }
			defer func() { followHook, noFollow = nil, false }()
			fres, err := importOne(context.Background(), in, filepath.Join(dir, "followed.arrows"), ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			noFollow = true
			rres, err := importOne(context.Background(), in, filepath.Join(dir, "read.arrows"), ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := []bool{followable, false}; !slices.Equal(followed, want) {
				t.Errorf("start state from the follower: %v, want %v", followed, want)
			}
			followedAny = followedAny || followed[0]
			a, _ := os.ReadFile(filepath.Join(dir, "followed.arrows"))
			b, _ := os.ReadFile(filepath.Join(dir, "read.arrows"))
			if len(a) == 0 || !bytes.Equal(a, b) {
				t.Errorf("followed import wrote %d bytes, the one that reads its events back %d, not the same", len(a), len(b))
			}
			fres.Out, rres.Out = "", ""
			if !reflect.DeepEqual(fres, rres) {
				t.Errorf("results differ:\nfollowed %+v\nread     %+v", fres, rres)
			}
		})
	}
	if !followedAny {
		t.Error("no import took its start state from the follower")
	}
}

// TestImportFollowDropped: follow(nil), the decoder's word that it stopped
// following (a decode in memory whose follower fell behind), leaves the
// import's follower holding nothing.
func TestImportFollowDropped(t *testing.T) {
	var f importFollow
	f.add([]trace.Event{{Seq: 0, Kind: trace.KindSegmentAlloc, Addr: 1 << 30, Size: 2 << 20},
		{Seq: 1, Kind: trace.KindAlloc, Addr: 1 << 30, Size: 512, Stack: trace.NoStack}})
	if f.reserved.n != 2 || f.reserved.end != 2<<20 || len(f.noStack) != 1 {
		t.Fatalf("after two events: %+v", f.eventScan)
	}
	f.add(nil)
	if !reflect.DeepEqual(f, importFollow{}) {
		t.Errorf("after follow(nil): %+v, want nothing held", f)
	}
}
