package allocator

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"
)

// TestRestoreSplitOversize restores a layout PyTorch cannot reach under
// max_split_size_mb: a 100 MiB segment (recorded without the setting)
// whose free 90 MiB remainder, an oversize block, is split from a live
// one. Replaying a wrapped trace with --conf max_split_size_mb gives such
// a start. An allocation that fails must then not release that block as
// if it were a whole segment (release_available_cached_blocks assumes
// oversize blocks are never split, and its cudaFree of a split block made
// the model panic): it fails with PyTorch's OOM, and the state stays
// sound.
func TestRestoreSplitOversize(t *testing.T) {
	conf, err := ParseConf("max_split_size_mb:40")
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	base := uint64(1) << 40
	a, err := New(conf, NewSimDevice(gib))
	if err != nil {
		t.Fatal(err)
	}
	a.SetMemoryLimit(120 * mib)
	if err := a.Restore([]SegmentInfo{{Addr: base, Size: 100 * mib, Blocks: []BlockInfo{
		{Addr: base, Size: 10 * mib, Requested: 10 * mib, State: ActiveAllocated},
	}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// 95 MiB fits no free block and, under the limit, no new segment.
	if _, err := a.Malloc(95*mib, 0); !errors.Is(err, ErrOOM) {
		t.Fatalf("Malloc(95 MiB) = %v, want an OOM", err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().Segment[0].Current; got != 1 {
		t.Errorf("%d segments after the OOM, want the restored one", got)
	}
	// The split oversize block still serves what fits it (an oversize
	// request takes a block less than 20 MiB larger).
	if _, err := a.Malloc(80*mib, 0); err != nil {
		t.Fatalf("Malloc(80 MiB): %v", err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreExpandable restores an expandable segment from its mapped
// ranges, as a snapshot lists them: two 20 MiB ranges with an unmapped page
// between them. The layout reads back as given, the page between is
// reserved and unmapped (the next 20 MiB request maps it, where PyTorch's
// find_expandable_block finds it), and freeing everything unmaps and
// releases the segment.
func TestRestoreExpandable(t *testing.T) {
	conf, err := ParseConf("expandable_segments:True")
	if err != nil {
		t.Fatal(err)
	}
	const page = 20 * mib
	base := uint64(1) << 40
	dev := NewSimDevice(80 * gib)
	a, err := New(conf, dev)
	if err != nil {
		t.Fatal(err)
	}
	segs := []SegmentInfo{
		{Addr: base + 2*page, Size: page, Expandable: true, Blocks: []BlockInfo{{Addr: base + 2*page, Size: page, Requested: page, State: ActiveAllocated}}},
		{Addr: base, Size: page, Expandable: true, Blocks: []BlockInfo{{Addr: base, Size: page, Requested: page - 100, State: ActiveAllocated}}},
	}
	if err := a.Restore(segs); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	got := a.Segments()
	if len(got) != 2 || got[0].Addr != base || got[1].Addr != base+2*page || !got[0].Expandable || got[0].Size != page {
		t.Fatalf("restored %+v", got)
	}
	st := a.Stats()
	if st.ReservedBytes[0].Current != 2*page || st.Segment[0].Current != 0 || st.NumDeviceAlloc != 2 {
		t.Errorf("reserved %d, segments %d, device allocs %d; want %d, 0, 2", st.ReservedBytes[0].Current, st.Segment[0].Current, st.NumDeviceAlloc, 2*page)
	}
	if !dev.Reserved(base+page) || !dev.Reserved(base+4560*page) {
		t.Error("the segment's unmapped pages are not reserved")
	}
	addr, err := a.Malloc(page, 0)
	if err != nil || addr != base+page {
		t.Fatalf("Malloc(20 MiB) = %#x, %v; want the unmapped page at %#x", addr, err, base+page)
	}
	for _, p := range []uint64{base, addr, base + 2*page} {
		if err := a.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if r := a.Stats().ReservedBytes[0].Current; r != 0 || dev.Reserved(base) {
		t.Errorf("after freeing everything: %d bytes reserved, reservation kept %v", r, dev.Reserved(base))
	}
}

// TestRestoreExpandablePage restores mapped ranges of 20 MiB pages under
// large_segment_size_mb:30 (a replay of a wrapped trace under another page
// size): the segment keeps pages that tile its ranges (10 MiB), and the
// model stays sound through allocation and release.
func TestRestoreExpandablePage(t *testing.T) {
	conf, err := ParseConf("expandable_segments:True,large_segment_size_mb:30")
	if err != nil {
		t.Fatal(err)
	}
	base := uint64(1) << 40
	a, err := New(conf, NewSimDevice(80*gib))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Restore([]SegmentInfo{
		{Addr: base, Size: 40 * mib, Expandable: true, Blocks: []BlockInfo{{Addr: base, Size: 16 * mib, Requested: 16 * mib, State: ActiveAllocated}}},
		{Addr: base + 60*mib, Size: 20 * mib, Expandable: true},
	}); err != nil {
		t.Fatal(err)
	}
	if e := a.expTab[1]; e.page != 10*mib {
		t.Errorf("page %d, want 10 MiB", e.page)
	}
	var live []uint64
	for _, n := range []int64{30 * mib, 5 * mib, 50 * mib} {
		addr, err := a.Malloc(n, 0)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, addr)
		if err := a.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	for _, addr := range append(live, base) {
		if err := a.Free(addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if r := a.Stats().ReservedBytes[0].Current; r != 0 {
		t.Errorf("%d bytes reserved after freeing everything", r)
	}
}

// TestRestoreExpandableFamilies restores expandable segments (large and
// small pool, two streams, free, allocated and pending-free blocks, unmapped
// pages between ranges) under every fuzz family but those of another
// quantum, expandable or not (a
// replay of a wrapped trace under other settings), then drives random
// requests, checking the invariants after each.
func TestRestoreExpandableFamilies(t *testing.T) {
	const page = 20 * mib
	lbase, sbase, obase := uint64(1)<<40, uint64(1)<<41, uint64(3)<<40
	segs := []SegmentInfo{
		{Addr: lbase, Size: 2 * page, Expandable: true, Blocks: []BlockInfo{
			{Addr: lbase, Size: 5 * mib, Requested: 5 * mib, State: ActiveAllocated},
			{Addr: lbase + 10*mib, Size: 3 * mib, Requested: 3 * mib, State: ActivePendingFree}}},
		{Addr: lbase + 3*page, Size: page, Expandable: true},
		{Addr: lbase + 5*page, Size: page, Expandable: true, Blocks: []BlockInfo{
			{Addr: lbase + 5*page + 2*mib, Size: 18 * mib, Requested: 17 * mib, State: ActiveAllocated}}},
		{Addr: sbase, Size: 4 * mib, Small: true, Expandable: true, Blocks: []BlockInfo{
			{Addr: sbase + 512, Size: 1024, Requested: 1000, State: ActiveAllocated}}},
		{Addr: obase, Size: page, Stream: 0x100, Expandable: true, Blocks: []BlockInfo{
			{Addr: obase, Size: 4 * mib, Requested: 4 * mib, State: ActiveAllocated}}},
	}
	for _, fam := range fuzzFamilies {
		if fam.round != 0 {
			continue // restored blocks have the recording's 512-byte quantum
		}
		conf, err := ParseConf(fam.conf)
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(conf, NewSimDevice(4*gib))
		if err != nil {
			t.Fatal(err)
		}
		a.SetMemoryLimit(fam.limit)
		if err := a.Restore(segs); err != nil {
			t.Fatalf("%q: %v", fam.conf, err)
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatalf("%q: after restore: %v", fam.conf, err)
		}
		live := []uint64{lbase, lbase + 5*page + 2*mib, sbase + 512, obase}
		x, served := uint32(7), 0
		for step := 0; step < 1500; step++ {
			x = x*1664525 + 1013904223
			switch op := x >> 29; {
			case op < 4:
				size := int64(x>>8%(24*mib)) + 1
				if op == 0 {
					size %= 4096
					size++
				}
				addr, err := a.Malloc(size, uint64(x>>7%2)<<8)
				if err == nil {
					live = append(live, addr)
					served++
				} else if !IsOOM(err) {
					t.Fatalf("%q: step %d: %v", fam.conf, step, err)
				}
			case op < 7 && len(live) > 0:
				i := int(x>>4) % len(live)
				if err := a.Free(live[i]); err != nil {
					t.Fatalf("%q: step %d: %v", fam.conf, step, err)
				}
				live = append(live[:i], live[i+1:]...)
			case op == 7:
				if err := a.EmptyCache(); err != nil {
					t.Fatalf("%q: step %d: %v", fam.conf, step, err)
				}
			}
			if err := a.CheckInvariants(); err != nil {
				t.Fatalf("%q: step %d: %v", fam.conf, step, err)
			}
		}
		if served < 100 {
			t.Errorf("%q: %d requests served", fam.conf, served)
		}
	}
}

// TestRestoreMemoryPerBlock restores 20,000 and 40,000 segments of 8 live
// blocks each, given sorted, and counts the bytes Restore allocates a
// block: at both sizes, the arena's two blocks (a live one and the free
// one after it) made once, and at most 80 bytes for the free sets and the
// index. The arena grown by doubling and each segment's blocks sorted in a
// copy took 509-515.
func TestRestoreMemoryPerBlock(t *testing.T) {
	const mib, perSeg = 1 << 20, 8
	for _, n := range []int{20000, 40000} {
		segs := make([]SegmentInfo, n)
		for i := range segs {
			s := &segs[i]
			s.Addr, s.Size = 1<<40+uint64(i)*(32*mib), 20*mib
			for j := range perSeg {
				s.Blocks = append(s.Blocks, BlockInfo{Addr: s.Addr + uint64(j)*(2*mib), Size: mib, Requested: mib, State: ActiveAllocated})
			}
		}
		a, err := New(DefaultConf(), NewSimDevice(1<<50))
		if err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		err = a.Restore(segs)
		runtime.ReadMemStats(&m1)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		per := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n*perSeg)
		limit := 2*float64(unsafe.Sizeof(block{})) + 80
		t.Logf("%d blocks: %.0f bytes allocated a block (limit %.0f)", n*perSeg, per, limit)
		if per > limit {
			t.Errorf("restoring %d blocks allocated %.0f bytes a block, more than %.0f", n*perSeg, per, limit)
		}
	}
}

// TestRestoreSharesActive checks that a restored state with no pending
// block keeps Active and ActiveBytes shared with Allocation and
// AllocatedBytes (activeApart false: a malloc and a free then update three
// statistics, not five), that one pending block separates them, and that
// the statistics agree with the blocks either way.
func TestRestoreSharesActive(t *testing.T) {
	base := uint64(1) << 40
	for _, pending := range []bool{false, true} {
		state := ActiveAllocated
		if pending {
			state = ActivePendingFree
		}
		a, err := New(DefaultConf(), NewSimDevice(gib))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Restore([]SegmentInfo{{Addr: base, Size: 20 * mib, Blocks: []BlockInfo{
			{Addr: base, Size: 2 * mib, Requested: 2 * mib, State: ActiveAllocated},
			{Addr: base + 4*mib, Size: 3 * mib, Requested: 3 * mib, State: state},
		}}}); err != nil {
			t.Fatal(err)
		}
		if a.activeApart != pending {
			t.Errorf("pending %v: activeApart = %v after Restore", pending, a.activeApart)
		}
		addr, err := a.Malloc(5*mib, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Free(addr); err != nil {
			t.Fatal(err)
		}
		if err := a.CheckInvariants(); err != nil {
			t.Errorf("pending %v: %v", pending, err)
		}
		s := a.Stats()
		if want := int64(2*mib + 5*mib + 3*mib); s.ActiveBytes[0].Peak != want {
			t.Errorf("pending %v: active_bytes peak %d, want %d", pending, s.ActiveBytes[0].Peak, want)
		}
	}
}
