package cuda

import (
	"sync"
	"time"
)

// MemorySample is NVML's used memory of one GPU at one time.
type MemorySample struct {
	Time      time.Time
	UsedBytes int64
}

// MemorySampler samples a GPU's used memory on a ticker while a recording
// runs. Start one with StartMemorySampler; Stop ends it and returns the
// samples. The first sample is taken at start and the last at Stop, so a
// run shorter than one period still has two.
type MemorySampler struct {
	read  func() (int64, error) // one NVML query
	now   func() time.Time
	close func() error // releases NVML; nil when nothing to release

	stopc chan struct{}
	done  chan struct{}
	once  sync.Once

	// Written by the sampling goroutine only, read after done closes.
	samples []MemorySample
	err     error
	stopErr error
}

// newMemorySampler starts sampling with read on each value of tick.
// stopTick stops the ticker; close releases what read uses.
func newMemorySampler(read func() (int64, error), now func() time.Time, tick <-chan time.Time, stopTick func(), close func() error) *MemorySampler {
	s := &MemorySampler{
		read:  read,
		now:   now,
		close: close,
		stopc: make(chan struct{}),
		done:  make(chan struct{}),
	}
	go s.loop(tick, stopTick)
	return s
}

func (s *MemorySampler) loop(tick <-chan time.Time, stopTick func()) {
	defer close(s.done)
	defer stopTick()
	s.sample()
	for s.err == nil {
		select {
		case <-tick:
			s.sample()
		case <-s.stopc:
			s.sample()
			return
		}
	}
	// A failed read ends sampling; wait for Stop to report it.
	<-s.stopc
}

func (s *MemorySampler) sample() {
	used, err := s.read()
	if err != nil {
		s.err = err
		return
	}
	s.samples = append(s.samples, MemorySample{Time: s.now(), UsedBytes: used})
}

// Stop ends sampling and returns the samples in time order. The error is the
// read that ended sampling early, if any (the samples before it are still
// returned), or a failure to release NVML. Calling Stop again returns the
// same result.
func (s *MemorySampler) Stop() ([]MemorySample, error) {
	s.once.Do(func() {
		close(s.stopc)
		<-s.done
		if s.close != nil {
			s.stopErr = s.close()
		}
	})
	if s.err != nil {
		return s.samples, s.err
	}
	return s.samples, s.stopErr
}
