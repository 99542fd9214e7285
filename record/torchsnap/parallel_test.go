package torchsnap

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

// withRegions makes regions of inputs of any size, in chunks of about
// chunk bytes, with workers goroutines, and has blockAhead cut pieces of
// chunk bytes, for the duration of a test.
func withRegions(t testing.TB, chunk, workers int) {
	minFile, minLeft, cmin, cmax, w, mw, serial, piece := parMinFile, parMinLeft, parChunkMin, parChunkMax, parWorkers, parMinWorkers, parSerial, aheadPiece
	parMinFile, parMinLeft, parChunkMin, parChunkMax, parWorkers, parMinWorkers, aheadPiece = 0, 0, chunk, chunk, workers, 1, chunk
	t.Cleanup(func() {
		parMinFile, parMinLeft, parChunkMin, parChunkMax, parWorkers, parMinWorkers, parSerial, aheadPiece = minFile, minLeft, cmin, cmax, w, mw, serial, piece
	})
}

// decodeBoth decodes data sequentially and with regions (without the
// sequential fallback), and fails the test unless both give the same
// snapshot or the same error.
func decodeBoth(t *testing.T, data []byte) (*Snapshot, bool) {
	t.Helper()
	want, werr := decode(bytes.NewReader(data), 0)
	events0 := regionEvents.Load()
	got, gerr := decodeAt(&parSource{ra: bytes.NewReader(data), size: int64(len(data))})
	if gerr == errParFallback {
		return want, false
	}
	if got != nil {
		// The regions' spans, for the import's stage report, then left out
		// of the comparison: the sequential decode has none.
		if regionEvents.Load() > events0 && len(got.Regions) == 0 {
			t.Error("regions decoded events, and no span was recorded")
		}
		end := int64(0)
		for _, r := range got.Regions {
			if r.Off < end || r.End <= r.Off || r.End > int64(len(data)) || r.Stop.Before(r.Start) || r.StopCPU < r.StartCPU {
				t.Fatalf("region span %+v after offset %d of %d bytes", r, end, len(data))
			}
			end = r.End
		}
		got.Regions = nil
		if a := got.Ahead; a.Batches > 0 && (a.End <= a.Off || a.End > int64(len(data))) {
			t.Fatalf("blocks read ahead %+v in %d bytes", a, len(data))
		}
		got.Ahead = AheadSpan{}
	}
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("errors differ:\nsequential: %v\nregions:    %v", werr, gerr)
	}
	if werr != nil {
		return nil, true
	}
	if !reflect.DeepEqual(want, got) {
		for i := range want.Devices {
			if i < len(got.Devices) && !reflect.DeepEqual(want.Devices[i].Events, got.Devices[i].Events) {
				for j := range want.Devices[i].Events {
					if j >= len(got.Devices[i].Events) || want.Devices[i].Events[j] != got.Devices[i].Events[j] {
						t.Logf("device %d event %d: want %+v", i, j, want.Devices[i].Events[j])
						if j < len(got.Devices[i].Events) {
							t.Logf("device %d event %d: got  %+v", i, j, got.Devices[i].Events[j])
						}
						break
					}
				}
			}
		}
		t.Fatalf("snapshots differ (%d vs %d stacks)", len(want.Stacks), len(got.Stacks))
	}
	return got, true
}

// TestRegions_matchSequential decodes every real snapshot and a generated
// one with regions of several chunk sizes and worker counts, and compares
// with the sequential decoding.
func TestRegions_matchSequential(t *testing.T) {
	inputs := map[string][]byte{}
	for _, path := range realSnapshots(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inputs[name(path)] = data
	}
	var buf bytes.Buffer
	if err := writeSyntheticSnapshot(&buf, 20000); err != nil {
		t.Fatal(err)
	}
	inputs["synthetic"] = buf.Bytes()
	if p := os.Getenv("TORCHSNAP_REGION_FILE"); p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		inputs["file"] = data
	}
	for _, cfg := range []struct {
		chunk, workers int
		serial         bool
	}{{64, 1, false}, {300, 3, false}, {4 << 10, 2, false}, {64 << 10, 4, false}, {300, 3, true}, {64 << 10, 4, true}} {
		for n, data := range inputs {
			t.Run(n, func(t *testing.T) {
				withRegions(t, cfg.chunk, cfg.workers)
				parSerial = cfg.serial
				before, failures := regionEvents.Load(), walkFailures.Load()
				s, ok := decodeBoth(t, data)
				if !ok {
					t.Errorf("chunk %d: fell back to sequential decoding", cfg.chunk)
				}
				if n := walkFailures.Load() - failures; n > 0 {
					t.Errorf("chunk %d: the parallel walk failed %d times", cfg.chunk, n)
				}
				n := 0
				for _, d := range s.Devices {
					n += len(d.Events)
				}
				t.Logf("chunk %d, %d workers, serial walk %v: %d of %d events decoded in regions", cfg.chunk, cfg.workers, cfg.serial, regionEvents.Load()-before, n)
			})
		}
	}
}

// FuzzRegions decodes every input with regions in tiny chunks, walked in
// parallel and serially, and sequentially: the results (or errors) must be
// the same, with no panic in any goroutine. Seed (testdata/fuzz/FuzzRegions): a snapshot of 1003 small
// entries (two batches, then one more), some with frames lists. The seed is
// large, so minimizing an input grown from it takes long, with the exec count
// standing still meanwhile: run it with a bounded minimization, e.g.
//
//	go test -run X -fuzz FuzzRegions -fuzzminimizetime 200x ./record/torchsnap
func FuzzRegions(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		withRegions(t, 48, 3)
		decodeBoth(t, data)
		parSerial = true
		decodeBoth(t, data)
	})
}

// A batch start's bytes inside a number (an address) make the parallel
// walk cut a chunk in the wrong place: the cut is found out, the region
// ends before it, and the rest of the file walks serially, with the same
// result.
func TestRegions_falseBatchStart(t *testing.T) {
	var buf bytes.Buffer
	if err := writeSyntheticSnapshot(&buf, 20000); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	// A LONG1 payload (an address) in the middle of the trace list, in a
	// chunk of its own after a batch start (chunks are 300 bytes here).
	i := bytes.Index(data[len(data)/3:], batchStart) + len(data)/3
	for i += 2000; i+10 < len(data) && !(data[i] == opLong1 && data[i+1] >= 5); i++ {
	}
	if i+10 >= len(data) {
		t.Fatal("no LONG1 of 5 bytes or more")
	}
	copy(data[i+2:], batchStart)
	withRegions(t, 300, 3)
	failures := walkFailures.Load()
	if _, ok := decodeBoth(t, data); !ok {
		t.Error("fell back to sequential decoding")
	}
	if walkFailures.Load() == failures {
		t.Error("the parallel walk did not notice the false batch start")
	}
}

// TestDerivedFrames: a frames list's items, dropped once its stack is made,
// are rebuilt where the pickle refers to the list again as a value
// (allocator_settings, read after the trace) and from segment blocks: the
// snapshot is the same as when the items are kept, sequentially and with
// regions.
func TestDerivedFrames(t *testing.T) {
	data, err := os.ReadFile("testdata/shared_frames.pickle")
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	deriveFrames = false
	want, err := decode(bytes.NewReader(data), 0)
	deriveFrames = true
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded with frames lists derived:\n%+v\nwith their items kept:\n%+v", got.Settings, want.Settings)
	}
	// The shared lists reached the settings with their items (frames,
	// which settings render as null), not as empty lists.
	i := bytes.Index([]byte(got.Settings.JSON), []byte(`"x_frames":`))
	if i < 0 || !bytes.HasPrefix([]byte(got.Settings.JSON[i:]), []byte(`"x_frames":[[null,`)) {
		t.Fatalf("allocator_settings JSON lacks the shared frames: %.200s", got.Settings.JSON[max(i, 0):])
	}
	withRegions(t, 2048, 3)
	decodeBoth(t, data)
}
