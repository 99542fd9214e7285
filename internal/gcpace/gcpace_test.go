package gcpace

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		base int
		live uint64
		want int
	}{
		{100, 3 << 20, 100},       // small heap: as asked
		{100, Headroom, 100},      // exactly the headroom
		{100, 2 * Headroom, 50},   // the growth held to Headroom
		{100, 100 * Headroom, 25}, // never below a quarter
		{200, 2 << 20, 200},       // an import's 200 while its heap is small
		{200, 2 * Headroom, 100},  // the growth held to 2·Headroom
		{200, 100 * Headroom, 50}, // a quarter of 200
		{40, 100 * Headroom, 25},  // never below MinPercent
		{25, 100 * Headroom, 25},  // at or below MinPercent: untouched
		{-1, 100 * Headroom, -1},  // collector off: untouched
		{100, 0, 100},
	} {
		if got := percent(c.base, c.live); got != c.want {
			t.Errorf("percent(%d, %d MiB) = %d, want %d", c.base, c.live>>20, got, c.want)
		}
	}
}

// TestPercentFlat: past Fall·Headroom (16 MiB) of live heap the
// percentage is the same at every size, so the collector's marking per
// allocated byte (live heap over percent × live heap) stays constant as a
// command's input doubles. With a Headroom of 32 MiB it fell from 100 to
// 25 over 32-128 MiB, where the growth axes' commands run, and their GC
// cost grew as n² there.
func TestPercentFlat(t *testing.T) {
	for _, b := range []int{100, 200} {
		want := percent(b, 16<<20)
		for live := uint64(16 << 20); live <= 1<<40; live *= 2 {
			if got := percent(b, live); got != want {
				t.Errorf("percent(%d, %d MiB) = %d, want %d as at 16 MiB: the GC's cost per byte grows with the heap", b, live>>20, got, want)
			}
		}
	}
}

// TestPacer: with 32 MiB live, the pacer sets MinPercent after a
// collection, and SetPercent's asked-for value comes back once the heap is
// small again.
func TestPacer(t *testing.T) {
	var last []int
	set = func(p int) int {
		last = append(last, p)
		return debug.SetGCPercent(p)
	}
	defer func() { set = debug.SetGCPercent }()
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	Start()
	wait := func(want int) {
		t.Helper()
		for range 100 {
			runtime.GC()
			time.Sleep(time.Millisecond)
			mu.Lock()
			got := -3
			if len(last) > 0 {
				got = last[len(last)-1]
			}
			mu.Unlock()
			if got == want {
				return
			}
		}
		t.Fatalf("the pacer set %v, want %d last", last, want)
	}
	big := make([]byte, 8*Headroom)
	for i := range big {
		big[i] = 1
	}
	wait(MinPercent)
	runtime.KeepAlive(big)
	big = nil
	wait(100)
	if prev := SetPercent(200); prev != 100 {
		t.Errorf("SetPercent(200) returned %d, want 100", prev)
	}
	wait(200)
	SetPercent(100)
}
