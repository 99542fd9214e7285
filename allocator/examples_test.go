package allocator

import (
	"fmt"
	"strings"
	"testing"
)

const (
	kib = 1 << 10
	gib = 1 << 30
)

// harness drives an allocator on a SimDevice and records its events.
type harness struct {
	t   *testing.T
	a   *Allocator
	dev *SimDevice
	ev  []Event
}

func newHarness(t *testing.T, conf string, total int64) *harness {
	t.Helper()
	c, err := ParseConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dev: NewSimDevice(total)}
	h.a, err = New(c, h.dev)
	if err != nil {
		t.Fatal(err)
	}
	h.a.SetObserver(ObserverFunc(func(e *Event) { h.ev = append(h.ev, *e) }))
	return h
}

func (h *harness) malloc(size int64) uint64 {
	h.t.Helper()
	addr, err := h.a.Malloc(size, 0)
	if err != nil {
		h.t.Fatalf("malloc(%d): %v", size, err)
	}
	h.check()
	return addr
}

func (h *harness) free(addr uint64) {
	h.t.Helper()
	if err := h.a.Free(addr); err != nil {
		h.t.Fatal(err)
	}
	h.check()
}

func (h *harness) check() {
	h.t.Helper()
	if err := h.a.CheckInvariants(); err != nil {
		h.t.Fatalf("invariants: %v", err)
	}
}

// events renders and clears the recorded events, addresses relative to base.
func (h *harness) events(base uint64) string {
	var s []string
	for _, e := range h.ev {
		if e.Action == ActOOM {
			s = append(s, fmt.Sprintf("%s %d", e.Action, e.Size))
			continue
		}
		s = append(s, fmt.Sprintf("%s +%d %d", e.Action, e.Addr-base, e.Size))
	}
	h.ev = h.ev[:0]
	return strings.Join(s, "; ")
}

func (h *harness) stats(want map[string]int64) {
	h.t.Helper()
	got := h.a.Stats().Map()
	for k, w := range want {
		if got[k] != w {
			h.t.Errorf("%s = %d, want %d", k, got[k], w)
		}
	}
}

// TestWorkedExamples checks every example of spec §18.
func TestWorkedExamples(t *testing.T) {
	t.Run("1_four_bytes", func(t *testing.T) {
		h := newHarness(t, "", 80*gib)
		a := h.malloc(4)
		if got := h.events(a); got != "segment_alloc +0 2097152; alloc +0 4" {
			t.Errorf("events: %s", got)
		}
		h.stats(map[string]int64{"segment.all.current": 1, "reserved_bytes.all.current": 2097152,
			"allocated_bytes.all.current": 512, "active_bytes.all.current": 512, "requested_bytes.all.current": 4,
			"inactive_split.all.current": 1, "inactive_split_bytes.all.current": 2096640,
			"segment.small_pool.current": 1, "segment.large_pool.current": 0})
		if b := h.malloc(4); b != a+512 {
			t.Errorf("second block at +%d", b-a)
		}
		h.stats(map[string]int64{"inactive_split.all.current": 1, "inactive_split_bytes.all.current": 2096128})
	})
	t.Run("2_516_bytes", func(t *testing.T) {
		h := newHarness(t, "", 80*gib)
		a := h.malloc(516)
		if s, _ := h.a.BlockSize(a); s != 1024 {
			t.Errorf("block size %d", s)
		}
		h.stats(map[string]int64{"reserved_bytes.small_pool.current": 2 * mib})
	})
	t.Run("3_5MiB", func(t *testing.T) {
		h := newHarness(t, "", 80*gib)
		a := h.malloc(5 * mib)
		if got := h.events(a); got != "segment_alloc +0 20971520; alloc +0 5242880" {
			t.Errorf("events: %s", got)
		}
		h.stats(map[string]int64{"inactive_split_bytes.all.current": 15 * mib, "inactive_split.all.current": 1})
		for i := int64(1); i <= 3; i++ {
			if b := h.malloc(5 * mib); b != a+uint64(5*mib*i) {
				t.Errorf("allocation %d at +%d", i, b-a)
			}
		}
		h.stats(map[string]int64{"inactive_split.all.current": 0, "inactive_split_bytes.all.current": 0,
			"segment.all.current": 1, "allocated_bytes.all.current": 20 * mib})
	})
	t.Run("4_15MiB", func(t *testing.T) {
		h := newHarness(t, "", 80*gib)
		a := h.malloc(15 * mib)
		if got := h.events(a); got != "segment_alloc +0 16777216; alloc +0 15728640" {
			t.Errorf("events: %s", got)
		}
		h.stats(map[string]int64{"allocated_bytes.all.current": 16 * mib, "requested_bytes.all.current": 15 * mib,
			"inactive_split.all.current": 0})
	})
	t.Run("5_1MiB_boundary", func(t *testing.T) {
		h := newHarness(t, "", 80*gib)
		h.malloc(mib)
		h.stats(map[string]int64{"reserved_bytes.small_pool.current": 2 * mib, "inactive_split_bytes.small_pool.current": mib})
		b := h.malloc(mib + 1)
		if s, _ := h.a.BlockSize(b); s != 1049088 {
			t.Errorf("1 MiB + 1 block size %d", s)
		}
		h.stats(map[string]int64{"reserved_bytes.large_pool.current": 20 * mib,
			"inactive_split_bytes.large_pool.current": 20*mib - 1049088})
	})
	t.Run("6_10MiB", func(t *testing.T) {
		h := newHarness(t, "", 80*gib)
		a := h.malloc(10 * mib)
		if got := h.events(a); got != "segment_alloc +0 10485760; alloc +0 10485760" {
			t.Errorf("events: %s", got)
		}
		b := h.malloc(9*mib + mib/2)
		if got := h.events(b); got != "segment_alloc +0 20971520; alloc +0 9961472" {
			t.Errorf("events: %s", got)
		}
		h.stats(map[string]int64{"inactive_split_bytes.all.current": 20*mib - 9*mib - mib/2})
	})
	t.Run("7_max_split_size_mb_64", func(t *testing.T) {
		h := newHarness(t, "max_split_size_mb:64", 80*gib)
		big := h.malloc(100 * mib)
		h.free(big)
		h.stats(map[string]int64{"oversize_segments.current": 1, "max_split_size": 64 * mib})
		h.ev = h.ev[:0]
		a := h.malloc(30 * mib)
		if got := h.events(a); got != "segment_alloc +0 31457280; alloc +0 31457280" {
			t.Errorf("30 MiB: %s", got)
		}
		if b := h.malloc(90 * mib); b != big {
			t.Errorf("90 MiB did not take the cached 100 MiB block")
		}
		h.stats(map[string]int64{"oversize_allocations.current": 1, "allocated_bytes.all.current": 130 * mib})
		h.ev = h.ev[:0]
		c := h.malloc(70 * mib)
		if got := h.events(c); got != "segment_alloc +0 73400320; alloc +0 73400320" {
			t.Errorf("70 MiB: %s", got)
		}
	})
	t.Run("7b_refused_oversize", func(t *testing.T) {
		h := newHarness(t, "max_split_size_mb:64", 80*gib)
		big := h.malloc(100 * mib)
		h.free(big)
		if c := h.malloc(70 * mib); c == big {
			t.Errorf("70 MiB took the 100 MiB block (100 >= 70+20)")
		}
	})
	t.Run("8_expandable", func(t *testing.T) {
		h := newHarness(t, "expandable_segments:True", 80*gib)
		a := h.malloc(5 * mib)
		if got := h.events(a); got != "segment_map +0 20971520; alloc +0 5242880" {
			t.Errorf("events: %s", got)
		}
		h.stats(map[string]int64{"segment.all.current": 0, "reserved_bytes.all.current": 20 * mib, "num_device_alloc": 1})
		b := h.malloc(25 * mib)
		if got := h.events(a); got != "segment_map +20971520 20971520; alloc +5242880 26214400" {
			t.Errorf("events: %s", got)
		}
		if b != a+5*mib {
			t.Errorf("25 MiB at +%d", b-a)
		}
		segs := h.a.Segments()
		if len(segs) != 1 || segs[0].Size != 40*mib || !segs[0].Expandable || len(segs[0].Blocks) != 3 ||
			segs[0].Blocks[2].Size != 10*mib {
			t.Errorf("segments: %+v", segs)
		}
	})
	t.Run("9_oom_message", func(t *testing.T) {
		h := newHarness(t, "", 80*gib)
		h.a.SetMemoryLimit(10 * mib)
		_, err := h.a.Malloc(5*mib, 0)
		if !IsOOM(err) {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(err.Error(), "Tried to allocate 20.00 MiB") || !strings.Contains(err.Error(), "10.00 MiB allowed; ") {
			t.Errorf("message: %s", err)
		}
		if got := h.events(0); got != "oom 5242880" {
			t.Errorf("events: %s", got)
		}
		h.stats(map[string]int64{"num_ooms": 1, "num_alloc_retries": 1, "num_sync_all_streams": 1})
	})
}

// TestRoundSize checks the §3.1 table for roundup_power2_divisions:4.
func TestRoundSize(t *testing.T) {
	c, err := ParseConf("roundup_power2_divisions:4")
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultConf()
	for _, tc := range []struct{ n, want, def int64 }{
		{1, 512, 512}, {1200, 1536, 1536}, {3000, 3072, 3072}, {1100000, 1310720, 1100288}, {5000000, 5242880, 5000192},
	} {
		if got := c.RoundSize(tc.n); got != tc.want {
			t.Errorf("div4 round(%d) = %d, want %d", tc.n, got, tc.want)
		}
		if got := d.RoundSize(tc.n); got != tc.def {
			t.Errorf("default round(%d) = %d, want %d", tc.n, got, tc.def)
		}
	}
}

// TestCrossStream checks record_stream: the block stays active_pending_free
// until its events complete, and a flush completes them.
func TestCrossStream(t *testing.T) {
	h := newHarness(t, "", 80*gib)
	a := h.malloc(4096)
	if err := h.a.RecordStream(a, 7); err != nil {
		t.Fatal(err)
	}
	h.free(a)
	h.stats(map[string]int64{"allocated_bytes.all.current": 0, "active_bytes.all.current": 512 * 8})
	if st := h.a.Segments()[0].Blocks[0].State; st != ActivePendingFree {
		t.Errorf("state %v", st)
	}
	if b := h.malloc(4096); b == a {
		t.Error("pending block reused")
	}
	h.a.MarkEventsDone(a)
	h.ev = h.ev[:0]
	h.malloc(4096) // process_events frees it first
	if got := h.events(a); !strings.HasPrefix(got, "free_completed +0 4096; alloc +0 4096") {
		t.Errorf("events: %s", got)
	}
	c := h.malloc(100)
	h.a.RecordStream(c, 9)
	h.free(c)
	h.ev = h.ev[:0]
	if err := h.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	h.check()
	if got := h.events(c); !strings.HasPrefix(got, "free_completed +0 100") {
		t.Errorf("flush events: %s", got)
	}
}

// TestPrivatePool checks §15: mallocs of a capture go to the private pool's
// own segments, which empty_cache returns only once the pool is released.
func TestPrivatePool(t *testing.T) {
	h := newHarness(t, "", 80*gib)
	pool := PoolID{A: 1}
	d := h.malloc(4096) // default pool
	h.a.BeginAllocateToPool(pool, func(s uint64) bool { return s == 0 })
	p := h.malloc(4096)
	h.a.EndAllocateToPool(pool)
	segs := h.a.Segments()
	if len(segs) != 2 || segs[0].Pool == segs[1].Pool {
		t.Fatalf("want one default and one private segment: %+v", segs)
	}
	if p>>21 == d>>21 {
		t.Errorf("private allocation %#x shares the default segment %#x", p, d)
	}
	h.free(p)
	h.free(d)
	if err := h.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	h.check()
	if n := len(h.a.Segments()); n != 1 {
		t.Errorf("%d segments after empty_cache with the pool in use, want the private one", n)
	}
	h.a.ReleasePool(pool)
	if err := h.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	h.check()
	if n := len(h.a.Segments()); n != 0 {
		t.Errorf("%d segments after releasing the pool", n)
	}
}

// TestGarbageCollection checks §10: with a limit and a threshold, a malloc
// that needs a new segment first frees old unsplit cached segments.
func TestGarbageCollection(t *testing.T) {
	h := newHarness(t, "garbage_collection_threshold:0.5", 80*gib)
	h.a.SetMemoryLimit(100 * mib)
	a := h.malloc(30 * mib)
	b := h.malloc(30 * mib)
	h.free(a)
	h.free(b)
	h.ev = h.ev[:0]
	h.malloc(36 * mib) // reserved 60 MiB > 50 MiB threshold: GC frees cached segments
	var frees int
	for _, e := range h.ev {
		if e.Action == ActSegmentFree {
			frees++
		}
	}
	if frees == 0 {
		t.Errorf("no segment freed by GC: %v", h.ev)
	}
	h.stats(map[string]int64{"num_alloc_retries": 0})
}
