package record

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/internal/gcpace"
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// Version is the tracer version written into every trace's producer field.
var Version = "0.1.0"

// ImportOptions control ImportSnapshots.
type ImportOptions struct {
	// Out is the output path for a single input; with several inputs it is a
	// directory (created if needed). Empty: next to each input, with the
	// extension replaced by .arrows.
	Out string
	// OutDir makes Out a directory even for one input (tracer import DIR).
	OutDir bool
	// Rank, when set, gives each input's distributed rank (from its file
	// name, or as the user said), stored as the trace's tracer.x.rank.
	Rank func(in string) (rank int, ok bool)
	// MemoryFraction and DeviceTotal annotate the trace with the run's
	// per-process memory limit (torch.cuda.set_per_process_memory_fraction),
	// which snapshots do not store; replays use it as the default limit.
	MemoryFraction float64
	DeviceTotal    int64
	DeviceName     string
	// Progress, when non-nil, receives one line per finished file.
	Progress io.Writer
	// Source and Extra override the trace's tracer.source and add
	// tracer.x.* annotations (tracer record -- python records the command).
	Source string
	Extra  map[string]string
	// EmptyCacheAfterOOM says the program empties the cache when it
	// catches an OOM (replay.Options.EmptyCacheAfterOOM): the import then
	// writes those calls as rows too, and notes it in the trace for replays
	// that infer the calls again (tracer replay --limit).
	EmptyCacheAfterOOM bool
}

// ImportResult describes one imported snapshot.
type ImportResult struct {
	In, Out       string
	Events        int64 // events written, reconstructed ones included
	Reconstructed int64 // events synthesised to restore the state at trace start
	Devices       int
	Truncated     bool                // the history was incomplete (ring buffer wrapped)
	Skipped       map[string]int      // unknown actions, by name
	Problems      []torchsnap.Problem // contradictions found by validation (warnings)
	// InferredLimit is the memory limit import assumed for a trace with OOMs
	// whose limit was not given (0 if none): see inferLimit.
	InferredLimit int64
	// Diverged lists the devices whose replay under the recorded settings
	// on the allocator model left the recording, and where: block sizes
	// are left unknown from there on.
	Diverged []Divergence
	// Warnings are other things the import could not do as asked, one
	// line each.
	Warnings []string
}

// Divergence is where the allocator model, replaying a device's recording
// under its own settings, first did otherwise than the recording: the
// recorded alloc (Seq, Addr, Size) it put elsewhere or could not make, or
// the recorded OOM (OOM set) that it satisfied.
type Divergence struct {
	Device int32
	Seq    int64 // the recorded event's seq in the imported trace
	Addr   uint64
	Size   int64
	OOM    bool
}

// String says where the model left the recording, for a warning.
func (d Divergence) String() string {
	if d.OOM {
		return fmt.Sprintf("device %d: the allocator model leaves the recording at seq %d (an out-of-memory of %s that the model satisfies): no block sizes from there on (a memory limit above the run's does this: import with the run's --fraction and --total-memory)",
			d.Device, d.Seq, allocator.FormatSize(d.Size))
	}
	return fmt.Sprintf("device %d: the allocator model leaves the recording at seq %d (alloc of %s at %#x): no block sizes from there on",
		d.Device, d.Seq, allocator.FormatSize(d.Size), d.Addr)
}

// ImportSnapshots converts PyTorch memory snapshots (pickle or JSON) into
// traces, several files in parallel. Each output is written to a temporary
// file renamed into place at the end, so a failed import leaves nothing.
// Results come back in input order; the first error stops nothing else but is
// returned, naming its file.
func ImportSnapshots(ctx context.Context, ins []string, opts ImportOptions) ([]*ImportResult, error) {
	outs, err := outputPaths(ins, opts.Out, opts.OutDir)
	if err != nil {
		return nil, err
	}
	switch {
	case os.Getenv("GOGC") != "":
	case decodesInMemory(ins) && !scratchFits(ins):
		// Decoding a file in memory keeps tables that grow with it (the
		// pickle memo, the frames lists, the workers' chunks) beside the
		// events, which lie outside the heap (torchsnap.ReadFileMapped);
		// at the default pace its garbage grows as large as those tables
		// between collections.
		defer gcpace.SetPercent(gcpace.SetPercent(25))
	default:
		// Decoding into a spill keeps a few MB on the heap, and its
		// garbage goes back to the system once it ends (importOne): at
		// the default pace the collector would run while decoding, slowing
		// the decoder with its write barriers and assists, for a peak that
		// comes later anyway. At 200 it runs only once, when importOne
		// forces it after decoding. So does a file decoded in memory with
		// its records in a scratch file, once decoded (paceDecode sets
		// its decode's pace): its heap is then a spill's, and at 25 the
		// annotation's first few MB of model met a collection after each.
		defer gcpace.SetPercent(gcpace.SetPercent(200))
	}
	results := make([]*ImportResult, len(ins))
	errs := make([]error, len(ins))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range ins {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return
			}
			results[i], errs[i] = importOne(ctx, ins[i], outs[i], opts)
			if opts.Progress != nil && errs[i] == nil {
				mu.Lock()
				fmt.Fprintf(opts.Progress, "imported %s → %s (%d events)\n", ins[i], outs[i], results[i].Events)
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// streamMax is the largest file imported through a spill (torchsnap.Open)
// where the parallel decoder would otherwise run: on 4 cores or more,
// larger files are decoded in memory by torchsnap.ReadFileMappedFollowed,
// whose regions decode a trace about twice as fast as the sequential
// decoder that a spill is filled by, and whose follower has the start
// state ready when decoding ends, as a spill's has. Up to 64 MiB its
// packed events go to a scratch file, as a spill's do, and the import's
// peak is then about 33 MiB for a real program's trace (few blocks live
// at once), and about 39 MiB from 19 to 22 MiB for one whose every
// allocation stays live: within twice the file from 21 MiB on, where a
// spill's is within twice the file from about 20 MB. Everything after
// decoding reads the events a chunk at a time either way.
var streamMax int64 = 21 << 20 // a variable for the tests

// recordsInScratch: a file decoded in memory keeps its packed events in
// a scratch file beside the output (torchsnap.ReadFileMappedIn: up to 64
// MiB), and is then Spilled; off, they stay in memory, as a larger
// file's do (tests).
var recordsInScratch = true

// snapHook, when set, runs as an import starts (tests).
var snapHook func()

// Tests: noFollow makes a spilled import read its events back for the start
// state and the scan, as it does where they were not followed; followHook
// receives, per import, whether the start state came from the follower.
var (
	noFollow   bool
	followHook func(followed bool)
)

// scratchFits reports whether every one of ins that openSnapshot decodes
// in memory keeps its packed records in a scratch file (up to
// torchsnap.ScratchMax), leaving the heap a spill's once decoded.
func scratchFits(ins []string) bool {
	for _, in := range ins {
		if size := fileSize(in); size > torchsnap.ScratchMax && sizeInMemory(size) {
			return false
		}
	}
	return recordsInScratch
}

// decodesInMemory reports whether openSnapshot decodes any of ins in memory.
func decodesInMemory(ins []string) bool {
	for _, in := range ins {
		if sizeInMemory(fileSize(in)) {
			return true
		}
	}
	return false
}

// sizeInMemory reports whether openSnapshot decodes a snapshot of size
// bytes (-1: unknown) in memory: past streamMax, where the parallel
// decoder runs.
func sizeInMemory(size int64) bool { return size > streamMax && runtime.GOMAXPROCS(0) >= 4 }

// fileSize is the size of the file at path, -1 if it cannot be stat'ed.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return st.Size()
}

// openSnapshot decodes the snapshot at in, of size bytes (-1: unknown):
// into a spill, so that the import's memory does not grow with the trace,
// unless sizeInMemory(size), where the parallel decoder runs (see
// streamMax). The events go to follow, if not nil, as they are decoded
// (spilled, or packed in memory).
//
// A spilled decode's follower makes its tables of addresses in fwOff, if
// not nil (Forward.TablesIn), for the caller to release once the start
// state is derived: the collector then neither counts nor has to find them.
func openSnapshot(in, out string, size int64, follow *importFollow, fwOff *grow.OffHeap) (*torchsnap.Snapshot, error) {
	if sizeInMemory(size) {
		defer paceDecode(size)()
		dir := outfile.ScratchDir(out)
		if !recordsInScratch {
			dir = "" // in the mapping
		}
		var add func([]trace.Event) // nil: nothing follows
		if follow != nil {
			add = follow.add
		}
		return torchsnap.ReadFileMappedFollowed(in, dir, add)
	}
	dir := outfile.ScratchDir(out)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		// Say so before decoding: the scratch file goes there first, and
		// an error about it would not name the output.
		if err == nil {
			err = fmt.Errorf("%s is not a directory", dir)
		}
		return nil, fmt.Errorf("import %s: output %s: %w", in, out, err)
	}
	if follow == nil {
		return torchsnap.Open(in, dir)
	}
	follow.fw.TablesIn(fwOff)
	return torchsnap.OpenFollowed(in, dir, follow.add)
}

// importOne imports one snapshot. Its memory is bounded by the state the
// passes keep (live blocks and segments, the stack table) and a few chunks
// of events, whatever the length of the trace: the events stay in the
// snapshot's spill (torchsnap.OpenFollowed) and every pass reads them a
// chunk at a time — Validate beside the writing; the replay that annotates
// block sizes, which the writer follows a chunk behind; and, unless the
// trace was followed as it was decoded (importFollow), the start state
// from the whole trace and a scan for the output's batches and the memory
// limit — and the output is written a piece of a batch at a time
// (trace.StreamWriter).
func importOne(ctx context.Context, in, out string, opts ImportOptions) (*ImportResult, error) {
	if snapHook != nil {
		snapHook()
	}
	var follow *importFollow
	if !noFollow {
		follow = &importFollow{}
	}
	timer := newStageTimer(in)
	stage := timer.aloneOnThread("decode")
	// The follower's tables, outside the Go heap where it follows a
	// spill; every call of the follower has returned when openSnapshot
	// does, and nothing reads them once the start state is derived.
	fwOff := new(grow.OffHeap)
	defer fwOff.Release()
	// A sequential decode into a spill makes its large tables outside
	// the heap (torchsnap.OpenFollowed), so the give-backs below need no
	// collection; a decode in memory makes them on it.
	size := fileSize(in) // -1 if it cannot be stat'ed: openSnapshot says why
	inMemory := sizeInMemory(size)
	snap, err := openSnapshot(in, out, size, follow, fwOff)
	if err != nil {
		return nil, err
	}
	if decoded := stage.end(); timer.on != nil && size >= 0 {
		timer.decodeParts(stage, decoded, snap.Regions, snap.Ahead, size)
	}
	stage = timer.alone("start state")
	if err := ctx.Err(); err != nil {
		snap.Close()
		return nil, fmt.Errorf("import %s: %w", in, err)
	}
	// The spill is closed as soon as its last reader is done (below), so
	// that the kernel frees its pages beside the writer's last work and
	// the replacement of an earlier output, not after them.
	closeSnap := sync.OnceFunc(snap.Close)
	defer closeSnap()
	spilled := snap.Spilled()
	followed := follow != nil && len(snap.Devices) == 1 && follow.fw.Followed(snap.Devices[0])
	if follow != nil && !followed {
		// What it followed (a decode in memory that dropped it) is
		// garbage: the collection below is to have its tables too.
		*follow = importFollow{}
		fwOff.Release()
	}
	bigSpill := size >= giveBackMin && spilled
	if bigSpill && !followed {
		// Decoding's garbage, before the passes below read the spill
		// back: a sequential decode's large tables (the pickle memo, the
		// frames lists, the buffers) were outside the heap and are
		// unmapped already, so it needs no collection, whose ~2 ms would
		// be the critical path's, only the text pages' release (giveBack).
		giveBack("decode", inMemory)
	}
	conf, err := allocator.ParseConf(snap.Settings.AllocConf)
	if err != nil {
		return nil, fmt.Errorf("import %s: recorded PYTORCH_CUDA_ALLOC_CONF %q: %v", in, snap.Settings.AllocConf, err)
	}
	res := &ImportResult{In: in, Out: out, Devices: len(snap.Devices), Skipped: map[string]int{}}
	if conf.Modelled() != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("recorded with backend:%s, which tracer does not model: "+
			"the block sizes and the replay check are the native caching allocator's", conf.Backend))
	}
	meta := importMeta(in, snap, opts)
	// One pass over the recorded events (eventScan), beside
	// reconstruction, unless they were followed as they were decoded
	// (importFollow).
	scanned := make(chan scan, 1)
	var fw *torchsnap.Forward // the start state, derived as the trace was decoded
	if followed {
		fw = &follow.fw
		scanned <- scan{recorded: []reservedScan{follow.reserved}, noStack: [][]uint64{follow.noStack}}
	} else {
		go scanEvents(snap, scanned)
	}
	if followHook != nil {
		followHook(fw != nil && fw.Covers(snap.Devices[0]))
	}
	// Reconstruct: the metadata records whether the history is complete.
	initial := make([][]trace.Event, len(snap.Devices))
	for i, d := range snap.Devices {
		if err == nil {
			initial[i], err = d.ReconstructFollowed(fw, conf.RoundSize)
			if err != nil {
				err = fmt.Errorf("import %s: device %d: %v", in, d.Index, err)
			}
		}
		if len(initial[i]) > 0 {
			meta.Truncated = true
		}
		for k, n := range d.Skipped {
			res.Skipped[k] += n
		}
	}
	if follow != nil {
		follow.fw = torchsnap.Forward{} // its tables gave the start state: the collector's before the replay's
		fwOff.Release()
	}
	sc := <-scanned
	if err != nil {
		return nil, err
	}
	if sc.err != nil {
		return nil, fmt.Errorf("import %s: %v", in, sc.err)
	}
	res.Truncated = meta.Truncated
	recorded := sc.recorded
	if !spilled || bigSpill && followed {
		// The decoder's garbage and the start state's tables, before the
		// annotation's model and numbering and validation's tables are
		// made: what the model does not reach of them stays unfaulted. A
		// sequential decode made its large ones outside the heap, unmapped
		// above: it skips the collection (giveBack) and its ~2 ms, for
		// the same peak on the GPU host.
		giveBack("start state", inMemory)
	}
	// The first device's annotation's memory is made now that its size is
	// known, on a goroutine of its own (prepareAnnotation), beside what
	// comes before the annotation. (The devices' annotations run one after
	// another: the others' are made as they start, so that no two are
	// resident at once.) Made beside the start state instead, it took new
	// memory where the start state's garbage would have served: the
	// import's peak grew by about a tenth.
	var prep *annotationPrep
	defer func() { prep.discard() }() // one the import did not reach
	if len(snap.Devices) > 0 {
		if blocks := annotationBlocks(recorded[0].blocksPeak, initial[0]); blocks > 0 {
			prep = prepareAnnotation(conf, snap.Devices[0].Index, blocks, spilled)
		}
	}
	stage.end()
	stage = timer.alone("empty_cache calls")
	if meta.MemoryLimit == 0 {
		if limit := inferLimit(initial, recorded); limit > 0 {
			meta.MemoryLimit = limit
			meta.Extra["memory_limit"] = "inferred: the recording's peak reserved, the smallest limit consistent with its OOMs"
			res.InferredLimit = limit
		}
	}
	// The program's empty_cache() calls, decided on the model before
	// anything is written: they are rows of the trace, whose length the
	// writer is told first. Only a device that released memory, or met an
	// OOM that the program is said to follow with one, has any.
	// Under the recording's own settings (the snapshot has its
	// allocator_settings) the model also infers the private pool of each
	// allocation (replay.Options.InferPools), here and in the annotation.
	inferPools := snap.Settings.JSON != ""
	rows := make([][]trace.Event, len(snap.Devices))
	flips := make([]map[replay.AllocKey]bool, len(snap.Devices))
	privs := make([]*privatePools, len(snap.Devices)) // with the pool aliases decidePools found
	for i, d := range snap.Devices {
		privs[i] = privateSegments(d)
		if sc := recorded[i]; sc.released || sc.ooms && opts.EmptyCacheAfterOOM {
			if rows[i], flips[i], err = decidePools(conf, inference{pools: inferPools, oomEmpties: opts.EmptyCacheAfterOOM}, meta.MemoryLimit, annotationTotal(meta, initial[i], sc), initial[i], d, max(sc.lastRelease, sc.lastOOM), privs[i]); err != nil {
				return nil, fmt.Errorf("import %s: device %d: %v", in, d.Index, err)
			}
		}
	}
	meta.EmptyCacheRows = true
	meta.Extra["empty_cache"] = "inferred: the allocator model, replaying the recording under its settings, decided which segment releases were empty_cache() calls"
	var total int64
	for i, d := range snap.Devices {
		total += int64(len(initial[i])) + d.Len() + int64(len(rows[i]))
	}
	var nulls []int // for the stream writer
	if spilled {
		nulls = batchNulls(total, initial, snap.Devices, sc.noStack, rows)
	}
	stage.end()
	// Validation (warnings only) runs beside the rest, on other cores
	// (validateParts). It reuses the start states Reconstruct derived.
	problems := make(chan []torchsnap.Problem, 1)
	validated := make(chan struct{})
	go func() {
		stage := timer.beside("validate")
		var all []torchsnap.Problem
		parts := validateParts()
		part := func(p int) func() {
			c := timer.beside(fmt.Sprintf("validate, part %d of %d", p+1, parts))
			return func() { c.end() }
		}
		for i, d := range snap.Devices {
			all = append(all, d.ValidateParts(recorded[i].blocksPeak, parts, part)...)
		}
		stage.end() // before the import can end: said before the command's end
		close(validated)
		problems <- all
		if !spilled {
			// Validation's tables (16 bytes a live block) are garbage now,
			// while the annotation's model, outside them, still grows:
			// hand them back (the import does not wait for it).
			debug.FreeOSMemory()
		}
	}()
	defer func() { res.Problems = <-problems }()
	// The first device's annotation starts now, before the writer is made
	// and the stacks added to it (up to 7 ms of the small snapshot's
	// critical path on the GPU host); each later device's once the writer
	// reaches it, so that no two devices' models are resident at once.
	anns := make([]*annotation, len(snap.Devices))
	startAnn := func(i int) *annotation {
		p := prep // the first device's, which its annotation takes
		prep = nil
		var lastRead func()
		if spilled && i == len(snap.Devices)-1 {
			// Validation and this reader are the spill's last readers.
			lastRead = func() {
				go func() {
					<-validated
					closeSnap()
				}()
			}
		}
		ini := initial[i] // the import lets go of initial[i] once written (below)
		return startAnnotation(&timer, spilled, snap.Devices[i].Len(), func(full chan<- []trace.Event, free <-chan []trace.Event) (*Divergence, error) {
			evs := ini
			ini = nil
			return annotateFlipped(conf, inferPools, meta.MemoryLimit, annotationTotal(meta, evs, recorded[i]), evs, snap.Devices[i], rows[i], flips[i], recorded[i].blocksPeak, p, privs[i], full, free, lastRead)
		})
	}
	if len(anns) > 0 {
		anns[0] = startAnn(0)
	}
	defer func() { // an import that fails before reading an annotation lets it end
		for _, a := range anns {
			a.drain()
		}
	}()
	// A spilled trace is written a piece of a batch at a time; one decoded
	// in memory (a large file on many cores), whose memory is the events
	// anyway, by Create's writer, which lays whole batches out on several
	// cores and writes through a window of its own, which for such files
	// beats the stream writer's positioned writes. Both write the same
	// bytes.
	write := timer.beside("write")
	defer func() { write.end(); stage.end() }() // an import that fails gives its thread back too
	var w eventWriter
	if spilled {
		w, err = trace.CreateStream(out, meta, total, nulls)
	} else {
		w, err = trace.Create(out, meta, trace.WriterOptions{Events: total})
	}
	if err != nil {
		return nil, err
	}
	ids := make([]trace.StackID, len(snap.Stacks))
	for i, st := range snap.Stacks {
		ids[i] = w.AddStack(st)
	}
	var stackMap []trace.StackID // nil: the writer's stack ids are the snapshot's (the usual case)
	for i, id := range ids {
		if id != trace.StackID(i) {
			stackMap = ids
			break
		}
	}
	put := func(evs []trace.Event) error { return w.WriteEvents(evs, stackMap) }
	for i, d := range snap.Devices {
		if err := put(initial[i]); err != nil {
			w.Abort()
			return nil, fmt.Errorf("import %s: %v", in, err)
		}
		res.Reconstructed += int64(len(initial[i]))
		base := w.Events() // the seq of d's first recorded event
		// The model annotates block sizes while the writer follows behind
		// it, a chunk at a time.
		if anns[i] == nil {
			anns[i] = startAnn(i)
		}
		a := anns[i]
		initial[i] = nil // written: the annotation's alone
		var read int64   // d's events written: its events before are read no more
		for evs := range a.full {
			if err == nil {
				err = ctx.Err() // a signal stops the import between chunks
			}
			for j := range evs {
				if evs[j].Kind != trace.KindEmptyCache { // a row of rows, not one of d's events
					read++
				}
			}
			// The buffer goes back as soon as the writer has copied it,
			// before it waits for a piece's encoding and before the
			// discard: the reader, which the annotation may be waiting
			// for, waits for it.
			back := func() { a.free <- evs[:cap(evs)] }
			if err == nil {
				err = putThen(w, evs, stackMap, back)
			} else {
				back()
			}
			d.DiscardBefore(read)
		}
		if err == nil {
			err = a.err
		}
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("import %s: device %d: %w", in, d.Index, err)
		}
		if diverged := a.diverged; diverged != nil {
			diverged.Device, diverged.Seq = d.Index, base+diverged.Seq
			res.Diverged = append(res.Diverged, *diverged)
		}
	}
	res.Events = w.Events()
	write.end()
	stage = timer.beside("close")
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("import %s: %v", in, err)
	}
	stage.end()
	return res, nil
}

// collectReconstructed is the fewest reconstructed events (96 bytes each)
// whose release by the annotation (annSource.NextBatch) has the import
// collect its heap.
const collectReconstructed = 64 << 10

// annotation is a device's annotation running (startAnnotation): the
// chunks it hands the writer (full, closed when it ends, after which err
// and diverged hold its result) and those handed back (free).
type annotation struct {
	full, free chan []trace.Event
	diverged   *Divergence
	err        error
}

// startAnnotation runs annotate, the annotation of a device of n events,
// on a goroutine of its own, with its chunk buffers (annotationChunks).
func startAnnotation(timer *stageTimer, spilled bool, n int64, annotate func(full chan<- []trace.Event, free <-chan []trace.Event) (*Divergence, error)) *annotation {
	inFlight := annotationBuffers(spilled)
	a := &annotation{full: make(chan []trace.Event, inFlight), free: make(chan []trace.Event, inFlight)}
	bufs, size := annotationChunks(inFlight, n)
	for range bufs {
		a.free <- make([]trace.Event, size)
	}
	go func() {
		stage := timer.beside("annotate")
		a.diverged, a.err = annotate(a.full, a.free)
		stage.end()
		close(a.full)
	}()
	return a
}

// drain reads what is left of a's chunks, handing each back, until the
// annotation ends; nil does nothing.
func (a *annotation) drain() {
	if a == nil {
		return
	}
	for evs := range a.full {
		a.free <- evs[:cap(evs)]
	}
}

// validateParts is how many goroutines an import's validation takes: the
// cores beside the annotation's (its model, its reader's numbering parts,
// and about three for the writer and the rest), up to 8. Each part reads
// every event and validates the blocks of an eighth of the addresses: at
// 4 parts on 16 cores each part took longer than the annotation beside
// it, the import's critical path once decoding is done.
func validateParts() int {
	procs := runtime.GOMAXPROCS(0)
	return min(8, max(1, procs-4-replay.NumberParts(procs)))
}

// importMeta is the metadata of the trace imported from the snapshot snap
// read from in: the recorded settings and record_function scopes (entries
// of another stage than START or END are left out), and what opts add; the
// import adds the history's completeness and an inferred memory limit.
func importMeta(in string, snap *torchsnap.Snapshot, opts ImportOptions) trace.Meta {
	meta := trace.Meta{
		Producer:       "tracer " + Version,
		Source:         trace.SourceSnapshot,
		SourceFile:     filepath.Base(in),
		AllocConf:      snap.Settings.AllocConf,
		AllocSettings:  snap.Settings.JSON,
		DeviceName:     opts.DeviceName,
		DeviceTotal:    opts.DeviceTotal,
		MemoryFraction: opts.MemoryFraction,
	}
	if opts.MemoryFraction > 0 && opts.DeviceTotal > 0 {
		meta.MemoryLimit = int64(opts.MemoryFraction * float64(opts.DeviceTotal))
	}
	if opts.Source != "" {
		meta.Source, meta.SourceFile = opts.Source, ""
	}
	for _, a := range snap.Annotations {
		if a.Stage != trace.AnnotationStart && a.Stage != trace.AnnotationEnd {
			continue
		}
		meta.Annotations = append(meta.Annotations, trace.Annotation{Name: a.Name, Stage: a.Stage, Device: a.Device, TimeUs: a.TimeUs})
	}
	trace.SortAnnotations(meta.Annotations)
	meta.Extra = map[string]string{}
	for k, v := range opts.Extra {
		meta.Extra[k] = v
	}
	if opts.Rank != nil {
		if r, ok := opts.Rank(in); ok {
			meta.Extra[trace.ExtraRank] = strconv.Itoa(r)
		}
	}
	if opts.EmptyCacheAfterOOM {
		meta.Extra[trace.ExtraEmptyCacheAfterOOM] = "given: the program empties the cache when it catches an OOM"
	}
	return meta
}

// putThen writes evs to w, as WriteEvents does, and calls copied once w
// has copied them: for a stream writer before it waits for a piece's
// encoding (trace.StreamWriter.WriteEventsThen), else once it returns.
func putThen(w eventWriter, evs []trace.Event, stackMap []trace.StackID, copied func()) error {
	if sw, ok := w.(*trace.StreamWriter); ok {
		return sw.WriteEventsThen(evs, stackMap, copied)
	}
	err := w.WriteEvents(evs, stackMap)
	copied()
	return err
}

// eventWriter is what importOne needs of a trace writer: *trace.Writer or
// *trace.StreamWriter.
type eventWriter interface {
	AddStack(trace.Stack) trace.StackID
	WriteEvents(evs []trace.Event, stackMap []trace.StackID) error
	Events() int64
	Close() error
	Abort()
}
