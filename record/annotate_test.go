package record

import (
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// TestAnnotateDisagreement replays snapshots under settings other than
// their recorded ones, so that the model leaves the recording partway, and
// checks that the import's annotation (annotateBlockSizes, over a spill, a
// chunk at a time) gives every event the block size the in-memory
// reference (annotateInMemory) gives it: the same sizes up to the first
// disagreement, none after it, and every chunk handed on in order.
func TestAnnotateDisagreement(t *testing.T) {
	cases := []struct{ snapshot, conf string }{
		{"attention_infer__pow2div8", ""},
		{"mlp_train__default", "roundup_power2_divisions:4"},
		{"churn__split64__seed2", ""},
		{"multistream__default__seed1", "expandable_segments:True"},
	}
	partway := 0
	for _, c := range cases {
		in := filepath.Join("../testdata/snapshots", c.snapshot+".pickle")
		conf, err := allocator.ParseConf(c.conf)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := torchsnap.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		d := mem.Devices[0]
		initial, err := d.Reconstruct(conf.RoundSize)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]trace.Event(nil), d.Events...)
		progress := make(chan int, 1<<16)
		wantAt, err := annotateInMemory(conf, 0, initial, want, progress)
		if err != nil {
			t.Fatal(err)
		}

		snap, err := torchsnap.Open(in, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		sd := snap.Devices[0]
		sinitial, err := sd.Reconstruct(conf.RoundSize)
		if err != nil {
			t.Fatal(err)
		}
		full, free := make(chan []trace.Event, 3), make(chan []trace.Event, 3)
		for range 3 {
			free <- make([]trace.Event, torchsnap.ChunkSize)
		}
		var got []trace.Event
		done := make(chan struct{})
		go func() {
			for evs := range full {
				got = append(got, evs...)
				free <- evs[:cap(evs)]
			}
			close(done)
		}()
		left, err := annotateBlockSizes(conf, false, 0, 0, sinitial, sd, nil, privateSegments(sd), full, free, nil)
		close(full)
		<-done
		snap.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case left == nil && wantAt >= 0, left != nil && left.Seq != int64(wantAt):
			t.Errorf("%s under %q: left the recording at %+v, the reference at %d", c.snapshot, c.conf, left, wantAt)
		case left != nil && wantAt < len(want) && (left.Addr != want[wantAt].Addr || left.Size != want[wantAt].Size):
			t.Errorf("%s under %q: left at %+v, the recorded alloc there is %#x, %d bytes", c.snapshot, c.conf, left, want[wantAt].Addr, want[wantAt].Size)
		}
		if left == nil {
			t.Errorf("%s under %q: the model did not leave the recording: the case checks nothing", c.snapshot, c.conf)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d events handed on, want %d", c.snapshot, len(got), len(want))
		}
		sized, unsized := 0, 0
		for i := range want {
			if got[i].Seq != want[i].Seq || got[i].BlockSize != want[i].BlockSize {
				t.Fatalf("%s: event %d: seq %d block size %d, want seq %d block size %d",
					c.snapshot, i, got[i].Seq, got[i].BlockSize, want[i].Seq, want[i].BlockSize)
			}
			if want[i].Kind == trace.KindAlloc {
				if want[i].BlockSize > 0 {
					sized++
				} else {
					unsized++
				}
			}
		}
		if sized > 0 && unsized > 0 {
			partway++
		}
		t.Logf("%s under %q: %d allocs annotated, %d not", c.snapshot, c.conf, sized, unsized)
	}
	if partway == 0 {
		t.Errorf("no case left the recording partway: the test checks nothing")
	}
}

// TestAnnotateReadError: when the spill cannot be read (here: closed under
// the annotation), annotateBlockSizes returns the error instead of hanging
// or annotating a part, and hands on no chunk it did not read.
func TestAnnotateReadError(t *testing.T) {
	snap, err := torchsnap.Open("../testdata/snapshots/churn__split64__seed2.pickle", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := snap.Devices[0]
	if d.Len() <= torchsnap.ChunkSize {
		t.Fatalf("%d events: the case needs more than one chunk", d.Len())
	}
	conf := allocator.DefaultConf()
	initial, err := d.Reconstruct(conf.RoundSize)
	if err != nil {
		t.Fatal(err)
	}
	snap.Close()
	full, free := make(chan []trace.Event, 3), make(chan []trace.Event, 3)
	for range 3 {
		free <- make([]trace.Event, torchsnap.ChunkSize)
	}
	handed := 0
	done := make(chan struct{})
	go func() {
		for evs := range full {
			handed += len(evs)
			free <- evs[:cap(evs)]
		}
		close(done)
	}()
	_, err = annotateBlockSizes(conf, false, 0, 0, initial, d, nil, nil, full, free, nil)
	close(full)
	<-done
	if err == nil {
		t.Fatal("no error from an annotation whose spill is closed")
	}
	if handed != 0 {
		t.Errorf("%d events handed on from a spill that could not be read", handed)
	}
}

// TestAnnotateNumbered checks that the annotation's replay gets its events
// numbered (readChunks, for replay.Options.Numbered): on a wrapped history,
// whose start state is replayed first, and a complete one over several
// chunks, every alloc the replay sees has a number, and every free takes
// the number of the alloc live at its address, the start state's included;
// on one core and on 16, where the numbering is in parts
// (replay.NumberParts), with fewer buffers than its chunks in flight.
func TestAnnotateNumbered(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	for _, procs := range []int{1, 16} {
		runtime.GOMAXPROCS(procs)
		annotateNumbered(t, procs)
	}
}

func annotateNumbered(t *testing.T, procs int) {
	for _, name := range []string{"mlp_train__wrap1500", "churn__split64__seed2"} {
		snap, err := torchsnap.ReadFile(filepath.Join("../testdata/snapshots", name+".pickle"))
		if err != nil {
			t.Fatal(err)
		}
		d := snap.Devices[0]
		conf := allocator.DefaultConf()
		initial, err := d.Reconstruct(conf.RoundSize)
		if err != nil {
			t.Fatal(err)
		}
		if name == "mlp_train__wrap1500" && len(initial) == 0 {
			t.Fatalf("%s: no start state: the case needs one", name)
		}
		free := make(chan []trace.Event, 3)
		for range 3 {
			free <- make([]trace.Event, torchsnap.ChunkSize)
		}
		live := map[uint64]int32{} // address → the number of its alloc
		allocs, frees := 0, 0
		var one replay.BlockNumbers // the numbers of one part
		differ := 0                 // events numbered otherwise than by one
		check := func(evs []trace.Event) {
			alone := slices.Clone(evs)
			one.Number(alone)
			for i := range evs {
				if evs[i].Ref != alone[i].Ref {
					differ++
				}
			}
			for i := range evs {
				ev := &evs[i]
				switch ev.Kind {
				case trace.KindAlloc:
					allocs++
					if ev.Ref <= 0 {
						t.Fatalf("%s: alloc at %#x has no number (%d)", name, ev.Addr, ev.Ref)
					}
					live[ev.Addr] = ev.Ref
				case trace.KindFreeRequested, trace.KindFreeCompleted:
					n, ok := live[ev.Addr]
					if !ok {
						continue
					}
					frees++
					if ev.Ref != n {
						t.Fatalf("%s: %v at %#x numbered %d, its alloc %d", name, ev.Kind, ev.Addr, ev.Ref, n)
					}
					if ev.Kind == trace.KindFreeCompleted {
						delete(live, ev.Addr)
					}
				}
			}
		}
		s := &annSource{initial: initial, n: d.Len(), full: free}
		s.ready = readChunks(initial, d, nil, privateSegments(d), free, annotationNumbers(d.Index, 0), func([]trace.Event) {}, nil)
		for evs := s.NextBatch(); evs != nil; evs = s.NextBatch() {
			check(evs)
		}
		if s.err != nil {
			t.Fatal(s.err)
		}
		if allocs == 0 || frees == 0 {
			t.Fatalf("%s: %d allocs and %d frees of them seen: nothing checked", name, allocs, frees)
		}
		if inParts := replay.NumberParts(procs) > 1; inParts != (differ > 0) {
			t.Errorf("%s, GOMAXPROCS=%d: %d events numbered otherwise than by one part (in parts: %v)", name, procs, differ, inParts)
		}
	}
}

// TestAnnSourceReleasesInitial: the annotation's source lets go of the
// reconstructed events once the replay asks for the batch after them, so
// that a wrapped history's (225k events, 21 MB, in a 27 MB snapshot) are
// collected before the replay restores them into its model, not kept to
// the annotation's end.
func TestAnnSourceReleasesInitial(t *testing.T) {
	ready := make(chan chunkRead, 2)
	full := make(chan []trace.Event, 2)
	initial := make([]trace.Event, 4096)
	freed := make(chan struct{})
	runtime.SetFinalizer(&initial[0], func(*trace.Event) { close(freed) })
	s := &annSource{initial: initial, n: 1, ready: ready, full: full}
	initial = nil
	ready <- chunkRead{}
	ready <- chunkRead{evs: make([]trace.Event, 1)}
	if got := s.NextBatch(); len(got) != 4096 {
		t.Fatalf("first batch: %d events, want the 4096 reconstructed", len(got))
	}
	if got := s.NextBatch(); len(got) != 1 {
		t.Fatalf("second batch: %d events, want the device's 1", len(got))
	}
	for range 3 {
		runtime.GC()
		select {
		case <-freed:
			runtime.KeepAlive(s)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Error("the reconstructed events are still held once the replay is past them")
	runtime.KeepAlive(s)
}
