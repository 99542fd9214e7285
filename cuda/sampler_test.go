package cuda

import (
	"errors"
	"testing"
	"time"
)

// fakeClock returns t0, t0+1s, t0+2s, ….
func fakeClock() func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(time.Second)
		return t
	}
}

func TestMemorySampler(t *testing.T) {
	used := int64(0)
	read := func() (int64, error) { used += 100; return used, nil }
	tick := make(chan time.Time)
	stopped, closed := false, false
	s := newMemorySampler(read, fakeClock(), tick, func() { stopped = true }, func() error { closed = true; return nil })
	for range 3 {
		tick <- time.Time{} // unbuffered: returns once the sampler took it
	}
	got, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 { // start, 3 ticks, stop
		t.Fatalf("got %d samples, want 5: %v", len(got), got)
	}
	for i, sm := range got {
		if want := int64(100 * (i + 1)); sm.UsedBytes != want {
			t.Errorf("sample %d: used %d, want %d", i, sm.UsedBytes, want)
		}
		if i > 0 && !sm.Time.After(got[i-1].Time) {
			t.Errorf("sample %d at %v, not after %v", i, sm.Time, got[i-1].Time)
		}
	}
	if !stopped || !closed {
		t.Errorf("ticker stopped %v, NVML closed %v; want both", stopped, closed)
	}
	again, err := s.Stop()
	if err != nil || len(again) != 5 {
		t.Errorf("second Stop = %d samples, %v", len(again), err)
	}
}

func TestMemorySampler_readError(t *testing.T) {
	n := 0
	boom := errors.New("boom")
	read := func() (int64, error) {
		n++
		if n == 3 {
			return 0, boom
		}
		return int64(n), nil
	}
	tick := make(chan time.Time)
	s := newMemorySampler(read, fakeClock(), tick, func() {}, nil)
	tick <- time.Time{}
	tick <- time.Time{} // third read fails; the sampler stops reading
	got, err := s.Stop()
	if !errors.Is(err, boom) {
		t.Errorf("Stop error = %v, want boom", err)
	}
	if len(got) != 2 {
		t.Errorf("got %d samples, want the 2 before the error", len(got))
	}
}
