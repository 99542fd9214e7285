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
		{100, 10 << 20, 100},      // small heap: as asked
		{100, Headroom, 100},      // exactly the headroom
		{100, 2 * Headroom, 50},   // the growth held to Headroom
		{100, 100 * Headroom, 25}, // never below MinPercent
		{200, 16 << 20, 200},      // an import's 200 while its heap is small
		{200, Headroom, 100},
		{25, 100 * Headroom, 25}, // at or below MinPercent: untouched
		{-1, 100 * Headroom, -1}, // collector off: untouched
		{100, 0, 100},
	} {
		if got := percent(c.base, c.live); got != c.want {
			t.Errorf("percent(%d, %d MiB) = %d, want %d", c.base, c.live>>20, got, c.want)
		}
	}
}

// TestPacer: with 96 MiB live, the pacer sets 33% after a collection
// (32 MiB of growth), and SetPercent's asked-for value comes back once the
// heap is small again.
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
	big := make([]byte, 3*Headroom)
	for i := range big {
		big[i] = 1
	}
	wait(33)
	runtime.KeepAlive(big)
	big = nil
	wait(100)
	if prev := SetPercent(200); prev != 100 {
		t.Errorf("SetPercent(200) returned %d, want 100", prev)
	}
	wait(200)
	SetPercent(100)
}
