package cuda

import "time"

// Latency accumulates the wall time of one kind of device call, measured on
// the monotonic clock around the driver call (one cgo crossing), so it
// includes the cgo and context-switch overhead a Go caller pays.
type Latency struct {
	Count int64         // calls, failed ones included
	Total time.Duration // summed wall time
	Max   time.Duration // slowest call
}

// Mean is Total/Count, or 0 before the first call.
func (l Latency) Mean() time.Duration {
	if l.Count == 0 {
		return 0
	}
	return l.Total / time.Duration(l.Count)
}

func (l *Latency) add(d time.Duration) {
	l.Count++
	l.Total += d
	if d > l.Max {
		l.Max = d
	}
}

// Timings is the per-kind latency of a Device's calls since timing was
// enabled (see Device.SetTiming). Map and Unmap count calls of the Device
// method, each of which creates or releases one handle per granule.
type Timings struct {
	Malloc  Latency // cuMemAlloc
	Free    Latency // cuMemFree
	Reserve Latency // cuMemAddressReserve
	Map     Latency // cuMemCreate+cuMemMap per granule, then one cuMemSetAccess
	Unmap   Latency // cuMemUnmap+cuMemRelease per granule
	Release Latency // cuMemAddressFree
}
