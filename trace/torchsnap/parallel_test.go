package torchsnap

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

// withRegions makes regions of inputs of any size, in chunks of about
// chunk bytes, with workers goroutines, for the duration of a test.
func withRegions(t testing.TB, chunk, workers int) {
	minFile, minLeft, cmin, cmax, w, mw := parMinFile, parMinLeft, parChunkMin, parChunkMax, parWorkers, parMinWorkers
	parMinFile, parMinLeft, parChunkMin, parChunkMax, parWorkers, parMinWorkers = 0, 0, chunk, chunk, workers, 1
	t.Cleanup(func() {
		parMinFile, parMinLeft, parChunkMin, parChunkMax, parWorkers, parMinWorkers = minFile, minLeft, cmin, cmax, w, mw
	})
}

// decodeBoth decodes data sequentially and with regions (without the
// sequential fallback), and fails the test unless both give the same
// snapshot or the same error.
func decodeBoth(t *testing.T, data []byte) (*Snapshot, bool) {
	t.Helper()
	want, werr := decode(bytes.NewReader(data))
	got, gerr := decodeAt(&parSource{bytes.NewReader(data), int64(len(data))})
	if gerr == errParFallback {
		return want, false
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
	for _, cfg := range []struct{ chunk, workers int }{{64, 1}, {300, 3}, {4 << 10, 2}, {64 << 10, 4}} {
		for n, data := range inputs {
			t.Run(n, func(t *testing.T) {
				withRegions(t, cfg.chunk, cfg.workers)
				before := regionEvents.Load()
				s, ok := decodeBoth(t, data)
				if !ok {
					t.Errorf("chunk %d: fell back to sequential decoding", cfg.chunk)
				}
				n := 0
				for _, d := range s.Devices {
					n += len(d.Events)
				}
				t.Logf("chunk %d, %d workers: %d of %d events decoded in regions", cfg.chunk, cfg.workers, regionEvents.Load()-before, n)
			})
		}
	}
}

// FuzzRegions decodes every input with regions in tiny chunks and
// sequentially: the results (or errors) must be the same, with no panic in
// any goroutine. Seed (testdata/fuzz/FuzzRegions): a snapshot of 1003 small
// entries (two batches, then one more), some with frames lists. The seed is
// large, so minimizing an input grown from it takes long, with the exec count
// standing still meanwhile: run it with a bounded minimization, e.g.
//
//	go test -run X -fuzz FuzzRegions -fuzzminimizetime 200x ./trace/torchsnap
func FuzzRegions(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		withRegions(t, 48, 3)
		parMinFile, parMinLeft = 0, 0
		decodeBoth(t, data)
	})
}
