package allocator

import "testing"

// Garbage collection releases only large-pool segments, so a run of
// releases that frees a small-pool segment is a malloc's only when the
// malloc's new segment is refused outright; past the GC threshold but
// under the limit, it was an empty_cache() call.
func TestWouldReleaseSmall(t *testing.T) {
	conf, err := ParseConf("garbage_collection_threshold:0.5")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(conf, NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	a.SetMemoryLimit(200 << 20)
	for range 6 { // 120 MiB reserved, past the 100 MiB threshold
		addr, err := a.Malloc(20<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Free(addr); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Malloc(20<<20, 0); err != nil { // keep the segment in use
			t.Fatal(err)
		}
	}
	const size = 30 << 20 // fits no cached block; 120 + 30 MiB is under the limit
	if !a.WouldRelease(size, 0, false) {
		t.Error("past the GC threshold, a malloc would release large segments; WouldRelease says not")
	}
	if a.WouldRelease(size, 0, true) {
		t.Error("under the limit, a malloc releases no small-pool segment; WouldRelease says it would")
	}
	a.SetMemoryLimit(140 << 20) // 120 + 30 MiB now exceeds it: the OOM path frees every cached segment
	if !a.WouldRelease(size, 0, true) {
		t.Error("over the limit, a malloc releases every cached segment; WouldRelease says not")
	}
}

// WouldEmpty says whether EmptyCache would leave a trace (a release, an
// unmap, a completed free): checked against EmptyCache itself on random
// states under plain and expandable segments.
func TestWouldEmpty(t *testing.T) {
	for _, cs := range []string{"", "expandable_segments:True"} {
		conf, err := ParseConf(cs)
		if err != nil {
			t.Fatal(err)
		}
		var seen [2]int // states where EmptyCache would do nothing, something
		for seed := range uint64(200) {
			a, err := New(conf, NewSimDevice(1<<40))
			if err != nil {
				t.Fatal(err)
			}
			rng := seed*0x9e3779b97f4a7c15 + 1
			next := func(n uint64) uint64 {
				rng ^= rng << 13
				rng ^= rng >> 7
				rng ^= rng << 17
				return rng % n
			}
			var live []uint64
			for range 1 + next(30) {
				size := int64(1+next(4096)) << (9 + next(3)*4) // 512 B .. 2 GiB scale, mostly small
				size = min(size, 96<<20)
				addr, err := a.Malloc(size, next(2))
				if err != nil {
					t.Fatal(err)
				}
				live = append(live, addr)
				if len(live) > 0 && next(3) == 0 {
					i := next(uint64(len(live)))
					if next(4) == 0 {
						if err := a.RecordStream(live[i], 7); err != nil {
							t.Fatal(err)
						}
					}
					if err := a.Free(live[i]); err != nil {
						t.Fatal(err)
					}
					live = append(live[:i], live[i+1:]...)
				}
			}
			want := a.WouldEmpty()
			before, pending := a.Stats(), len(a.pending)-a.pendDead
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			after := a.Stats()
			got := pending > 0 || after.ReservedBytes[0].Current != before.ReservedBytes[0].Current
			if got != want {
				t.Fatalf("%q seed %d: WouldEmpty %v, but EmptyCache changed something: %v", cs, seed, want, got)
			}
			if a.WouldEmpty() {
				t.Fatalf("%q seed %d: WouldEmpty right after EmptyCache", cs, seed)
			}
			if want {
				seen[1]++
			} else {
				seen[0]++
			}
		}
		if seen[0] == 0 || seen[1] == 0 {
			t.Errorf("%q: the states tried do not cover both answers: %v", cs, seen)
		}
	}
}
