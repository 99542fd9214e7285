package record

import (
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/trace"
)

// importFollow is what an import derives from a trace as it is decoded,
// on a goroutine of the decoder's (the spill's writer, or that of a decode
// in memory that follows its packed events) while decoding goes on, rather
// than in passes over the events once decoding is done: the start state
// (torchsnap.Forward) and the eventScan. It holds for the snapshot's
// device if the snapshot has one and its trace is all that was followed
// (Forward.Followed); otherwise the passes run as before.
type importFollow struct {
	fw torchsnap.Forward
	eventScan
}

// add follows evs; nil says the decoder stopped following (a decode in
// memory whose follower fell behind): what it holds is garbage.
func (f *importFollow) add(evs []trace.Event) {
	if evs == nil {
		*f = importFollow{}
		return
	}
	f.fw.Add(evs)
	f.eventScan.add(evs)
}

// eventScan is what an import learns from one pass over a device's
// recorded events, in order: the reserved bytes for inferLimit, and which
// events have no stack (a bit an event, by Seq), from which the stream
// writer of a spilled trace learns, before it starts a batch, how many of
// its events have none.
type eventScan struct {
	reserved reservedScan
	noStack  []uint64
}

func (s *eventScan) add(evs []trace.Event) {
	s.reserved.add(evs)
	for j := range evs {
		k := evs[j].Seq
		for int64(len(s.noStack)) <= k/64 {
			s.noStack = append(s.noStack, 0)
		}
		if evs[j].Stack == trace.NoStack {
			s.noStack[k/64] |= 1 << (k % 64)
		}
	}
}

// scan is each device's eventScan, or why one could not be made.
type scan struct {
	recorded []reservedScan
	noStack  [][]uint64
	err      error
}

// scanEvents makes snap's scan, reading each device's events (back from
// the spill, if spilled), and sends it on scanned. The no-stack bits are
// for the stream writer of a spilled trace only: an in-memory one is
// scanned for its reserved bytes alone.
func scanEvents(snap *torchsnap.Snapshot, scanned chan<- scan) {
	sc := scan{recorded: make([]reservedScan, len(snap.Devices)), noStack: make([][]uint64, len(snap.Devices))}
	spilled := snap.Spilled()
	buf := make([]trace.Event, torchsnap.ChunkSize)
	for i, d := range snap.Devices {
		var es eventScan
		for lo := int64(0); lo < d.Len() && sc.err == nil; lo += torchsnap.ChunkSize {
			var evs []trace.Event
			if evs, sc.err = d.Chunk(lo, min(d.Len(), lo+torchsnap.ChunkSize), buf); sc.err != nil {
				break
			}
			if spilled {
				es.add(evs) // Chunk's Seq is the index among d's events
			} else {
				es.reserved.add(evs)
			}
		}
		sc.recorded[i], sc.noStack[i] = es.reserved, es.noStack
	}
	scanned <- sc
}

// defaultDeviceTotal is the annotation's device when the trace does not
// say (replay's default, an 80 GiB H100).
const defaultDeviceTotal = 80 << 30

// annotationTotal is the memory of the simulated device the annotation of
// one device's recording replays on: the device's own (meta.DeviceTotal)
// when known, else defaultDeviceTotal, and never less than the memory limit
// or the most the recording reserved (initial, its reconstructed start, and
// recorded, the scan of its recorded events), which a real device held.
func annotationTotal(meta trace.Meta, initial []trace.Event, recorded reservedScan) int64 {
	total := meta.DeviceTotal
	if total <= 0 {
		total = defaultDeviceTotal
	}
	s := scanReserved(initial)
	total = max(total, meta.MemoryLimit, s.peak, s.end)
	if recorded.grew {
		total = max(total, s.end+recorded.peak)
	}
	return total
}

// inferLimit returns, for a recording with OOM events, the peak of its
// reserved bytes: the smallest per-process limit under which every recorded
// segment allocation succeeds, and — because the real limit was at least this
// and the recorded failures exceeded the real one — every recorded failure
// still fails. Replaying under it reproduces the recording's OOMs and
// retries. It returns 0 for a recording without OOMs. recorded[i] is
// scanReserved of device i's recorded events, initial[i] its reconstructed ones.
func inferLimit(initial [][]trace.Event, recorded []reservedScan) int64 {
	var peak int64
	ooms := false
	for i, evs := range initial {
		s := scanReserved(evs)
		peak = max(peak, s.peak)
		if r := recorded[i]; r.grew {
			peak = max(peak, s.end+r.peak)
		}
		ooms = ooms || s.ooms || recorded[i].ooms
	}
	if !ooms {
		return 0
	}
	return peak
}

// reservedScan sums the segment bytes a run of events reserves, from 0.
type reservedScan struct {
	end, peak  int64 // at the end, and the highest after a segment_alloc or segment_map
	grew, ooms bool  // there was a segment_alloc or segment_map; an oom
	released   bool  // there was a segment_free or segment_unmap
	// lastRelease is the index of the last of them among the events
	// scanned (n so far), lastOOM that of the last oom.
	lastRelease, lastOOM, n int64
	// blocks is allocs less free_completed so far, from 0, and
	// blocksPeak its highest: the most blocks live at once beyond those
	// live before the run, which Validate reserves its table for.
	blocks, blocksPeak int64
}

func scanReserved(evs []trace.Event) reservedScan {
	var s reservedScan
	s.add(evs)
	return s
}

// add continues the scan with evs, the next events of the run.
func (s *reservedScan) add(evs []trace.Event) {
	for j := range evs {
		switch evs[j].Kind {
		case trace.KindSegmentAlloc, trace.KindSegmentMap:
			s.end += evs[j].Size
			if !s.grew || s.end > s.peak {
				s.peak = s.end
			}
			s.grew = true
		case trace.KindSegmentFree, trace.KindSegmentUnmap:
			s.end -= evs[j].Size
			s.released, s.lastRelease = true, s.n+int64(j)
		case trace.KindOOM:
			s.ooms, s.lastOOM = true, s.n+int64(j)
		case trace.KindAlloc:
			s.blocks++
			s.blocksPeak = max(s.blocksPeak, s.blocks)
		case trace.KindFreeCompleted:
			s.blocks--
		}
	}
	s.n += int64(len(evs))
}
