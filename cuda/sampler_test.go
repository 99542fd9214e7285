package cuda

import (
	"errors"
	"testing"
	"time"
)

func TestMemorySampler(t *testing.T) {
	used := int64(0)
	read := func() (int64, error) { used += 100; return used, nil }
	tick := make(chan time.Time)
	stopped, closed := false, false
	s, err := newMemorySampler(read, tick, func() { stopped = true }, func() error { closed = true; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if s.Latest() != 100 || s.Samples() != 1 {
		t.Fatalf("after start: latest %d, %d samples; want the first reading taken", s.Latest(), s.Samples())
	}
	for i := range 3 {
		tick <- time.Time{} // unbuffered: returns once the sampler took it
		if i > 0 {          // the reading before this tick is done by now
			if want := int64(100 * (i + 1)); s.Latest() < want {
				t.Errorf("tick %d: latest %d, want at least %d", i, s.Latest(), want)
			}
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.Samples() != 5 || s.Latest() != 500 { // start, 3 ticks, stop
		t.Fatalf("%d samples, latest %d; want 5 and 500", s.Samples(), s.Latest())
	}
	if !stopped || !closed {
		t.Errorf("ticker stopped %v, NVML closed %v; want both", stopped, closed)
	}
	if err := s.Stop(); err != nil || s.Samples() != 5 {
		t.Errorf("second Stop = %v, %d samples", err, s.Samples())
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
	s, err := newMemorySampler(read, tick, func() {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tick <- time.Time{}
	tick <- time.Time{} // third read fails; the sampler stops reading
	if err := s.Stop(); !errors.Is(err, boom) {
		t.Errorf("Stop error = %v, want boom", err)
	}
	if s.Samples() != 2 || s.Latest() != 2 {
		t.Errorf("%d samples, latest %d; want the 2 before the error", s.Samples(), s.Latest())
	}
}

func TestMemorySampler_firstReadFails(t *testing.T) {
	stopped := false
	_, err := newMemorySampler(func() (int64, error) { return 0, errors.New("no GPU") }, nil, func() { stopped = true }, nil)
	if err == nil || !stopped {
		t.Errorf("start = %v, ticker stopped %v; want an error and the ticker stopped", err, stopped)
	}
}
