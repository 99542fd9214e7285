package allocator

import "testing"

// TestLazyPeaks: the peaks that mallocs leave to the next free or to the
// reading of the statistics (StatArray.up and down) are the greatest
// values the counters had, in each pool and over both, whether a free or
// only the end of the calls came after them.
func TestLazyPeaks(t *testing.T) {
	a, _ := New(DefaultConf(), NewSimDevice(1<<40))
	// Two large blocks and a small one, then both large freed: the peak
	// of every array was before the first free.
	l1 := mustMalloc(t, a, 3<<20, 0)
	l2 := mustMalloc(t, a, 5<<20, 0)
	s1 := mustMalloc(t, a, 1000, 0)
	mustFree(t, a, l1)
	mustFree(t, a, l2)
	st := a.Stats()
	const large, small = 8 << 20, 1024
	for _, c := range []struct {
		name string
		arr  StatArray
		want [3]int64 // peak: all, small_pool, large_pool
	}{
		{"allocation", st.Allocation, [3]int64{3, 1, 2}},
		{"allocated_bytes", st.AllocatedBytes, [3]int64{large + small, small, large}},
		{"active_bytes", st.ActiveBytes, [3]int64{large + small, small, large}},
		{"requested_bytes", st.RequestedBytes, [3]int64{large + 1000, 1000, large}},
	} {
		for i, w := range c.want {
			if got := c.arr[i].Peak; got != w {
				t.Errorf("%s.%s.peak = %d, want %d", c.name, statTypeNames[i], got, w)
			}
		}
	}
	// The small block freed and a smaller one made: the last malloc's
	// value (one block) stays below the peaks; then more small blocks than
	// ever were live at once raise the small pool's and the aggregate's
	// count peaks with no free after them.
	mustFree(t, a, s1)
	for range 4 {
		mustMalloc(t, a, 512, 0)
	}
	st = a.Stats()
	if g := st.Allocation; g[0].Peak != 4 || g[1].Peak != 4 || g[2].Peak != 2 {
		t.Errorf("allocation peaks %d/%d/%d, want 4/4/2", g[0].Peak, g[1].Peak, g[2].Peak)
	}
	if g := st.AllocatedBytes; g[0].Peak != large+small || g[1].Peak != 2048 || g[0].Current != 2048 {
		t.Errorf("allocated_bytes peak %d, small_pool peak %d, current %d", g[0].Peak, g[1].Peak, g[0].Current)
	}
}
