package record

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/trace"
)

// TestAnnotatePrepared: an annotation whose memory prepareAnnotation made
// allocates at least the model's arena and numbered table less than one
// that makes them itself (the bytes the process allocates during each,
// least of 3), with the same block sizes.
func TestAnnotatePrepared(t *testing.T) {
	in := filepath.Join("../testdata/snapshots", "churn__split64__seed2.pickle")
	conf := allocator.DefaultConf()
	annotate := func(prepared bool) (uint64, []trace.Event) {
		snap, err := torchsnap.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		d := snap.Devices[0]
		initial, err := d.Reconstruct(conf.RoundSize)
		if err != nil {
			t.Fatal(err)
		}
		sc := scanReserved(d.Events)
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
		var prep *annotationPrep
		if prepared {
			prep = prepareAnnotation(conf, d.Index, annotationBlocks(sc.blocksPeak, initial))
			<-prep.done
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = annotateFlipped(conf, false, 0, 0, initial, d, nil, nil, sc.blocksPeak, prep, privateSegments(d), full, free, nil)
		runtime.ReadMemStats(&after)
		close(full)
		<-done
		if err != nil {
			t.Fatal(err)
		}
		return after.TotalAlloc - before.TotalAlloc, got
	}
	least := func(prepared bool) (uint64, []trace.Event) {
		var best uint64
		var evs []trace.Event
		for r := range 3 {
			b, e := annotate(prepared)
			if r == 0 || b < best {
				best, evs = b, e
			}
		}
		return best, evs
	}
	plain, want := least(false)
	prepared, got := least(true)
	snap, err := torchsnap.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	blocks := int(scanReserved(snap.Devices[0].Events).blocksPeak)
	model := uint64(blocks) * (64 + 32) // an arena's block and a numbered slot
	t.Logf("%d blocks live at once: %d bytes allocated by the annotation, %d prepared", blocks, plain, prepared)
	if prepared+model > plain {
		t.Errorf("%d blocks live at once: the prepared annotation allocated %d bytes, the plain one %d: want %d less at least", blocks, prepared, plain, model)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events annotated prepared, %d plain", len(got), len(want))
	}
	for i := range want {
		if got[i].BlockSize != want[i].BlockSize {
			t.Fatalf("event %d: block size %d prepared, %d plain", i, got[i].BlockSize, want[i].BlockSize)
		}
	}
}
