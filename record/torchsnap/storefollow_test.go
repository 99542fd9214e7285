package torchsnap

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestReadFileMappedFollowed: a Forward fed by ReadFileMappedFollowed
// covers the device of every real snapshot whose events are packed, and of
// a real-shaped one of 60,000 entries, decoded by regions or sequentially,
// its records in the mapping or in a scratch file; it is handed the events
// in order from the first, each once; and ReconstructFollowed gives what
// Reconstruct gives on the snapshot decoded into memory.
func TestReadFileMappedFollowed(t *testing.T) {
	ins := append(realSnapshots(t), writeShapedFile(t, 60_000))
	for _, regions := range []bool{false, true} {
		for _, scratch := range []bool{false, true} {
			t.Run(fmt.Sprintf("regions %v, scratch file %v", regions, scratch), func(t *testing.T) {
				if regions {
					withRegions(t, 256<<10, 4)
				}
				followed, regioned := 0, 0
				for _, path := range ins {
					dir := ""
					if scratch {
						dir = t.TempDir()
					}
					r0 := regionEvents.Load()
					var f Forward
					var next int64
					var outOfOrder []int64
					s, err := ReadFileMappedFollowed(path, dir, func(evs []trace.Event) {
						if evs == nil {
							t.Errorf("%s: follow(nil), as if the follower were dropped", name(path))
						}
						for j := range evs {
							if evs[j].Seq != next {
								outOfOrder = append(outOfOrder, evs[j].Seq)
							}
							next++
						}
						f.Add(evs)
					})
					if err != nil {
						t.Fatal(err)
					}
					d := s.Devices[0]
					if len(outOfOrder) > 0 {
						t.Errorf("%s: events handed out of order (first %d)", name(path), outOfOrder[0])
					}
					if d.Events != nil {
						// Too small a file for its events to be packed
						// (sizeFor): there is nothing to follow.
						s.Close()
						continue
					}
					followed++
					if regionEvents.Load() > r0 {
						regioned++
					}
					if len(s.Devices) != 1 || !f.Covers(d) {
						t.Errorf("%s: %d devices; the follower, given %d events, covers the first's %d: %v",
							name(path), len(s.Devices), next, d.Len(), f.Covers(d))
						s.Close()
						continue
					}
					if scratch != (d.rf != nil) {
						t.Errorf("%s: records in a scratch file %v, want %v", name(path), d.rf != nil, scratch)
					}
					got, err := d.ReconstructFollowed(&f, roundSize)
					if err != nil {
						t.Fatal(err)
					}
					mem := mustRead(t, path)
					want, _ := mem.Devices[0].Reconstruct(roundSize)
					if !slices.Equal(got, want) || d.Truncated != mem.Devices[0].Truncated {
						t.Errorf("%s: ReconstructFollowed: %d events (truncated %v), Reconstruct %d (%v)",
							name(path), len(got), d.Truncated, len(want), mem.Devices[0].Truncated)
					}
					s.Close()
				}
				// (Regions of the small testdata snapshots, cut into chunks of
				// a few entries, keep their events unpacked: the real-shaped
				// one's are packed.)
				if regions && regioned == 0 || !regions && followed < len(ins)/2 {
					t.Errorf("%d snapshots had their events packed and followed, %d of them decoded by regions", followed, regioned)
				}
			})
		}
	}
}

// TestReadFileMappedFollowed_dropped: a follower that falls behind the
// regions' packing by more than followMax events is dropped, not waited
// for: the packing goes on while it is held up, nothing more is handed to
// it but one follow(nil), it is not said to have followed the device, and
// ReconstructFollowed derives the start state without it, as Reconstruct
// does.
func TestReadFileMappedFollowed_dropped(t *testing.T) {
	defer func(n int64) { followMax = n }(followMax)
	followMax = 4 * spillChunk
	withRegions(t, 256<<10, 2)
	path := writeShapedFile(t, 60_000)
	dropped := make(chan struct{})
	var once sync.Once
	followDropped = func() { once.Do(func() { close(dropped) }) }
	defer func() { followDropped = nil }()
	var f Forward
	calls, told := 0, 0
	packed := regionPacked.Load()
	s, err := ReadFileMappedFollowed(path, t.TempDir(), func(evs []trace.Event) {
		if evs == nil {
			told++ // let go of what it holds
			return
		}
		if calls == 0 {
			<-dropped // held up until the packer gives up on it
		}
		calls++
		f.Add(evs)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := s.Devices[0]
	if f.n >= d.Len() || f.Followed(d) || d.followN != -1 {
		t.Fatalf("follower given %d of %d events, followed %v, followN %d: want it dropped", f.n, d.Len(), f.Followed(d), d.followN)
	}
	if regionPacked.Load() == packed {
		t.Error("no region packed its events")
	}
	if told != 1 {
		t.Errorf("follow(nil) called %d times, want once", told)
	}
	if calls == 0 || f.n > followMax {
		t.Errorf("the follower was called %d times and given %d events, want it held up and then given at most %d", calls, f.n, followMax)
	}
	got, err := d.ReconstructFollowed(&f, roundSize)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mustRead(t, path).Devices[0].Reconstruct(roundSize)
	if !slices.Equal(got, want) {
		t.Errorf("ReconstructFollowed after a dropped follower: %d events, Reconstruct %d", len(got), len(want))
	}
}

// writeShapedFile writes writeRealShaped's snapshot of n entries (60,000:
// 4.5 MB) to a file in a temporary directory, and returns its path.
func writeShapedFile(t *testing.T, n int) string {
	var buf bytes.Buffer
	if _, err := writeRealShaped(&buf, n); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shaped.pickle")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
