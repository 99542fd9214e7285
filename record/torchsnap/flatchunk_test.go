package torchsnap

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// paddedSnapshot writes a snapshot of entries trace entries whose keys are
// memoized after pad memo slots (a padding list of strings and of frames
// that the entries' frames lists refer to, as segments' are), but for the
// keys in early, memoized first (as a seed-shaped snapshot's segments'
// blocks memoize size and stream).
func paddedSnapshot(tb testing.TB, pad, entries int, early ...string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	p := newPickleWriter(&buf)
	p.dict(func() {
		p.str("padding")     // a key the decoder ignores, taking memo slots
		var frameSlots []int // frames written before the traces, as segments' are
		p.list(pad, func(i int) {
			if i < len(early) {
				p.str(early[i])
				return
			}
			if i >= 40+len(early) {
				p.str(fmt.Sprintf("s%d", i))
				return
			}
			frameSlots = append(frameSlots, p.memo)
			p.dict(func() {
				p.str("name")
				p.str(fmt.Sprintf("fn%d", i))
				p.str("filename")
				p.str("a.py")
				p.str("line")
				p.int(int64(10 + i))
			})
		})
		p.str("segments")
		p.list(0, nil)
		p.str("device_traces")
		p.list(1, func(int) {
			var frames []int
			p.list(entries, func(i int) {
				p.dict(func() {
					p.str("action")
					p.str([]string{"alloc", "free_requested", "free_completed"}[i%3])
					p.str("addr")
					p.int(0x7f0000000000 + int64(i/3)*512)
					p.str("size")
					p.int(512)
					p.str("stream")
					p.int(0)
					p.str("time_us")
					p.int(1795280419000000 + int64(i))
					p.str("compile_context")
					p.str("N/A")
					p.str("user_metadata")
					p.str("")
					p.str("frames")
					if i%2 == 1 {
						p.get(frames[i%len(frames)])
						return
					}
					frames = append(frames, p.list(2, func(j int) {
						p.get(frameSlots[(i/2+j*7)%len(frameSlots)])
					}))
				})
			})
		})
	})
	p.op(opStop)
	if err := p.w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// decodesAsRef checks that data, a snapshot of entries trace entries on
// one device (what: its name in failures), decodes as the reference reader
// decodes it.
func decodesAsRef(t *testing.T, data []byte, entries int, what string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "snapshot.pickle")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if n := len(got.Devices[0].Events); n != entries {
		t.Fatalf("%s: %d events, want %d", what, n, entries)
	}
	sameSnapshot(t, got, refDecode(t, path))
}

// TestFlatEventKeysPastFirstChunk: a snapshot whose trace entries' keys are
// memoized past the memo's first chunk (as in a real program's snapshot
// whose segments take more than 65,536 slots), some of them in the first
// chunk (as in a seed-shaped one, whose segments' blocks memoize size and
// stream), decodes as the reference reader does, and its entries take
// flatEvent's path (their frames lists made compact, not as lists of
// frames).
func TestFlatEventKeysPastFirstChunk(t *testing.T) {
	const pad, entries = memoChunk + 5000, 3000
	for _, early := range [][]string{nil, {"size", "stream"}, {"addr", "size", "stream", "frames"}} {
		data := paddedSnapshot(t, pad, entries, early...)
		decodesAsRef(t, data, entries, fmt.Sprintf("early %q", early))

		u := newUnpickler(bytes.NewReader(data), newBuilder())
		if _, err := u.run(); err != nil {
			t.Fatal(err)
		}
		// The padding, the segments and the traces' lists; flatDict would
		// make a list for each new frames list.
		if n := u.b.lists.n; n > 10 {
			t.Errorf("early %q: %d lists made, want the few that are not frames", early, n)
		}
	}
}

// TestRegionEntryKeysPastFirstChunk: the same snapshot decoded by regions
// gives what the sequential decoder and the reference reader give, and the
// regions decode nearly all its entries (half with a new frames list) on
// flatEntry's path, as many as when the keys are in the memo's first chunk.
func TestRegionEntryKeysPastFirstChunk(t *testing.T) {
	const entries = 3000
	withRegions(t, 4<<10, 4)
	slow := map[int]int64{}
	for _, pad := range []int{1000, memoChunk + 5000} {
		data := paddedSnapshot(t, pad, entries)
		path := filepath.Join(t.TempDir(), "padded.pickle")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		events, items := regionEvents.Load(), regionItemsEntries.Load()
		got, ok := decodeBoth(t, data)
		if !ok {
			t.Fatal("fell back to sequential decoding")
		}
		sameSnapshot(t, got, refDecode(t, path))
		n := regionEvents.Load() - events
		slow[pad] = regionItemsEntries.Load() - items
		t.Logf("pad %d: %d of %d entries in regions, %d by items", pad, n, entries, slow[pad])
		if n < entries/2 || slow[pad] > n/100 {
			t.Fatalf("pad %d: regions decoded %d of %d entries, %d of them by collecting items", pad, n, entries, slow[pad])
		}
	}
	if slow[memoChunk+5000] != slow[1000] {
		t.Errorf("keys past the first chunk: %d entries decoded by collecting items, %d with keys in it", slow[memoChunk+5000], slow[1000])
	}
}
