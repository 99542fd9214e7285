package record

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/cputime"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// TestAnnotatePrepared: an annotation whose memory prepareAnnotation made
// beforehand, on another goroutine, allocates at least the model's arena
// and numbered table less than one that makes them itself, its thread
// takes a small part of the minor page faults (on Linux: the model's first
// touches of that memory, which Replayer.Follow makes resident ahead of
// it), and the block sizes are the same.
func TestAnnotatePrepared(t *testing.T) {
	const blocks = 1 << 18 // ~26 MB of arena and table: ~6,500 pages
	d := blocksDevice(blocks)
	conf := allocator.DefaultConf()
	annotate := func(prepared bool) (bytes uint64, faults int64, evs []trace.Event) {
		evs = make([]trace.Event, 0, d.Len())
		full, free := make(chan []trace.Event, 3), make(chan []trace.Event, 3)
		for range 3 {
			free <- make([]trace.Event, torchsnap.ChunkSize)
		}
		done := make(chan struct{})
		go func() {
			for c := range full {
				evs = append(evs, c...)
				free <- c[:cap(c)]
			}
			close(done)
		}()
		for i := range d.Events {
			d.Events[i].BlockSize = 0
		}
		debug.FreeOSMemory() // the memory of the run before faults in again
		var prep *annotationPrep
		if prepared {
			prep = prepareAnnotation(conf, d.Index, annotationBlocks(blocks, nil), false)
			<-prep.done
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f0 := cputime.ThreadFaults()
		left, err := annotateFlipped(conf, false, 0, 0, nil, d, nil, nil, blocks, prep, privateSegments(d), full, free, nil)
		faults = cputime.ThreadFaults() - f0
		runtime.ReadMemStats(&after)
		close(full)
		<-done
		if err != nil || left != nil {
			t.Fatalf("annotation: left the recording at %+v, error %v", left, err)
		}
		return after.TotalAlloc - before.TotalAlloc, faults, evs
	}
	plainBytes, plainFaults, want := annotate(false)
	// The faults ahead of the model are another goroutine's, which a busy
	// machine can leave behind: the least of three tries.
	bytes, faults, got := annotate(true)
	for try := 1; try < 3 && faults*4 > plainFaults; try++ {
		_, f, _ := annotate(true)
		faults = min(faults, f)
	}
	model := uint64(blocks) * (64 + 32) // an arena's block and a numbered slot
	t.Logf("%d blocks: the plain annotation allocated %d bytes, %d minor faults on its thread; the prepared one %d bytes, %d faults",
		blocks, plainBytes, plainFaults, bytes, faults)
	if bytes+model > plainBytes {
		t.Errorf("the prepared annotation allocated %d bytes, the plain one %d: want %d less at least", bytes, plainBytes, model)
	}
	if runtime.GOOS == "linux" && !raceBuild && faults*4 > plainFaults {
		t.Errorf("the prepared annotation's thread took %d minor faults, the plain one's %d: want a quarter at most", faults, plainFaults)
	}
	for i := range want {
		if got[i].BlockSize != want[i].BlockSize || want[i].Kind == trace.KindAlloc && want[i].BlockSize != 512 {
			t.Fatalf("event %d (%v): block size %d prepared, %d plain, want 512 for an alloc", i, want[i].Kind, got[i].BlockSize, want[i].BlockSize)
		}
	}
}

// blocksDevice is a device's trace of n blocks of 512 bytes allocated one
// after another and never freed, 4,096 to each 2 MiB segment, in order.
func blocksDevice(n int) *torchsnap.Device {
	const seg, size = 2 << 20, 512
	evs := make([]trace.Event, 0, n+n/(seg/size)+1)
	base := uint64(1) << 40
	for i := range n {
		addr := base + uint64(i)*size
		if i%(seg/size) == 0 {
			evs = append(evs, trace.Event{Kind: trace.KindSegmentAlloc, Addr: addr, Size: seg, Stack: trace.NoStack})
		}
		evs = append(evs, trace.Event{Kind: trace.KindAlloc, Addr: addr, Size: size, Stack: trace.NoStack})
	}
	for i := range evs {
		evs[i].Seq = int64(i)
	}
	return &torchsnap.Device{Events: evs}
}

// TestPrepareSpilledOnePart: a spilled trace's annotation numbers its
// blocks in one part on any number of cores (numberParts), where one
// decoded in memory takes replay.NumberParts of them: several parts'
// tables raise a mid-size import's peak.
func TestPrepareSpilledOnePart(t *testing.T) {
	old := runtime.GOMAXPROCS(16)
	defer runtime.GOMAXPROCS(old)
	for _, spilled := range []bool{true, false} {
		prep := prepareAnnotation(allocator.DefaultConf(), 0, 1<<16, spilled)
		got := prep.nums.Parts()
		prep.discard()
		want := replay.NumberParts(16)
		if spilled {
			want = 1
		}
		if got != want || want == 1 && !spilled {
			t.Errorf("spilled %v: %d numbering parts, want %d", spilled, got, want)
		}
	}
}
