package torchsnap

import (
	"sync"
	"unsafe"

	"github.com/tracer-dev/tracer/trace"
)

// hugeMapMin: a mapping of events this large or larger (mapEvents; a file
// of about 70 MB or more) asks for huge pages, and its memory is given back
// in huge pages. A smaller one takes 4 KiB pages, given back in granules of
// 64 KiB: a mid-size file's decode holds up to a granule or two beyond its
// records and the events not yet packed at each of their ends, and huge
// ones came to an eighth of a 32 MB file's budget of twice its bytes.
const hugeMapMin = 128 << 20

// discardGrain is the granule in which the events' memory in mapping m is
// given back.
func discardGrain(m []byte) uintptr {
	if len(m) >= hugeMapMin {
		return 2 << 20
	}
	return 64 << 10
}

// discarder gives back the memory of the events of a device decoded
// outside the Go heap (ReadFileMapped) once both their readers are past
// them: the caller of DiscardBefore, which reads the trace once in order
// (an import's replay and writer), and Validate, which an import runs
// beside it.
type discarder struct {
	mu              sync.Mutex
	mapped          []byte  // the snapshot's mapping, which holds d's events or records
	read, validated int64   // how far each reader is
	done            uintptr // the end of the memory given back
}

// DiscardBefore says that the caller will not read d's events before hi
// again. Where d's events lie outside the Go heap (ReadFileMapped), their
// memory goes back to the system once Validate is past them too: a
// Validate of d must run, beside the caller or after it, for any to go
// back. Events given back read as zero events, so no other pass may read
// them (Reconstruct, decidePools' replay, ... run before).
func (d *Device) DiscardBefore(hi int64) {
	if dc := d.disc; dc != nil {
		dc.mu.Lock()
		dc.read = max(dc.read, hi)
		dc.release(d)
		dc.mu.Unlock()
	}
}

// validatedTo is Validate's DiscardBefore.
func (d *Device) validatedTo(hi int64) {
	if dc := d.disc; dc != nil {
		dc.mu.Lock()
		dc.validated = max(dc.validated, hi)
		dc.release(d)
		dc.mu.Unlock()
	}
}

// release gives back the whole granules of d's events (or records) before
// both readers' positions.
func (dc *discarder) release(d *Device) {
	base, size, n := uintptr(unsafe.Pointer(unsafe.SliceData(d.Events))), unsafe.Sizeof(trace.Event{}), len(d.Events)
	if d.recs != nil {
		base, size, n = uintptr(unsafe.Pointer(unsafe.SliceData(d.recs))), unsafe.Sizeof(srec{}), len(d.recs)
	}
	hi := min(dc.read, dc.validated, int64(n))
	if hi <= 0 || len(dc.mapped) == 0 {
		return
	}
	m0 := uintptr(unsafe.Pointer(unsafe.SliceData(dc.mapped)))
	if base < m0 || base+uintptr(n)*size > m0+uintptr(len(dc.mapped)) {
		return // not the mapping's memory: never give back the heap's
	}
	g := discardGrain(dc.mapped)
	lo := max(dc.done, (base+g-1)&^(g-1))
	end := (base + uintptr(hi)*size) &^ (g - 1)
	if end > lo {
		discardEvents(dc.mapped[lo-m0 : end-m0])
		dc.done = end
	}
}
