package cuda

import (
	"sync"
	"sync/atomic"
	"time"
)

// MemorySampler keeps NVML's latest reading of a GPU's used memory while a
// recording runs, for the recorder to stamp on each event (Event.DeviceUsed).
// Reading NVML on the allocation path would cost microseconds per event; a
// goroutine reading it every period costs the path one atomic load. NVML
// stays initialized (and the device handle open) between readings, so each
// one is a single query. Memory does not grow with the run: only the latest
// reading and a count are kept.
//
// Start one with StartMemorySampler: it takes the first reading before it
// returns, so the first event already carries one. Stop ends it.
type MemorySampler struct {
	read  func() (int64, error) // one NVML query
	close func() error          // releases NVML; nil when nothing to release

	latest atomic.Int64
	n      atomic.Int64

	stopc chan struct{}
	done  chan struct{}
	once  sync.Once

	err     error // the read that ended sampling early; read after done closes
	stopErr error
}

// newMemorySampler takes a first reading, then reads on each value of tick
// until Stop. stopTick stops the ticker; close releases what read uses. A
// failing first reading is returned, and nothing is started.
func newMemorySampler(read func() (int64, error), tick <-chan time.Time, stopTick func(), close func() error) (*MemorySampler, error) {
	s := &MemorySampler{read: read, close: close, stopc: make(chan struct{}), done: make(chan struct{})}
	if err := s.sample(); err != nil {
		stopTick()
		return nil, err
	}
	go s.loop(tick, stopTick)
	return s, nil
}

func (s *MemorySampler) loop(tick <-chan time.Time, stopTick func()) {
	defer close(s.done)
	defer stopTick()
	for {
		select {
		case <-tick:
			if s.err = s.sample(); s.err != nil {
				<-s.stopc // a failed read ends sampling; Stop reports it
				return
			}
		case <-s.stopc:
			s.err = s.sample()
			return
		}
	}
}

func (s *MemorySampler) sample() error {
	used, err := s.read()
	if err != nil {
		return err
	}
	s.latest.Store(used)
	s.n.Add(1)
	return nil
}

// Latest returns the last reading of used memory in bytes. Safe from any
// goroutine.
func (s *MemorySampler) Latest() int64 { return s.latest.Load() }

// Samples returns how many readings were taken.
func (s *MemorySampler) Samples() int64 { return s.n.Load() }

// Stop ends sampling, taking a last reading. The error is the read that
// ended sampling early, if any, or a failure to release NVML. Calling Stop
// again returns the same result.
func (s *MemorySampler) Stop() error {
	s.once.Do(func() {
		close(s.stopc)
		<-s.done
		if s.close != nil {
			s.stopErr = s.close()
		}
	})
	if s.err != nil {
		return s.err
	}
	return s.stopErr
}
