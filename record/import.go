package record

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
	"github.com/tracer-dev/tracer/trace/torchsnap"
)

// Version is the tracer version written into every trace's producer field.
var Version = "0.1.0"

// ImportOptions control ImportSnapshots.
type ImportOptions struct {
	// Out is the output path for a single input; with several inputs it is a
	// directory (created if needed). Empty: next to each input, with the
	// extension replaced by .arrows.
	Out string
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
	// ModelMismatches counts events where replaying the recording under its
	// own settings on the allocator model disagreed with it; block sizes are
	// left unknown from the first one on.
	ModelMismatches int
}

// ImportSnapshots converts PyTorch memory snapshots (pickle or JSON) into
// traces, several files in parallel. Each output is written to a temporary
// file renamed into place at the end, so a failed import leaves nothing.
// Results come back in input order; the first error stops nothing else but is
// returned, naming its file.
func ImportSnapshots(ctx context.Context, ins []string, opts ImportOptions) ([]*ImportResult, error) {
	outs, err := outputPaths(ins, opts.Out)
	if err != nil {
		return nil, err
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
			results[i], errs[i] = importOne(ins[i], outs[i], opts)
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

func outputPaths(ins []string, out string) ([]string, error) {
	outs := make([]string, len(ins))
	for i, in := range ins {
		base := strings.TrimSuffix(filepath.Base(in), filepath.Ext(in)) + ".arrows"
		switch {
		case out == "":
			outs[i] = filepath.Join(filepath.Dir(in), base)
		case len(ins) == 1 && !isDir(out):
			outs[i] = out
		default:
			if err := os.MkdirAll(out, 0o755); err != nil {
				return nil, fmt.Errorf("import: %w", err)
			}
			outs[i] = filepath.Join(out, base)
		}
	}
	return outs, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func importOne(in, out string, opts ImportOptions) (*ImportResult, error) {
	snap, err := torchsnap.ReadFile(in)
	if err != nil {
		return nil, err
	}
	conf, err := allocator.ParseConf(snap.Settings.AllocConf)
	if err != nil {
		return nil, fmt.Errorf("import %s: recorded PYTORCH_CUDA_ALLOC_CONF %q: %v", in, snap.Settings.AllocConf, err)
	}
	res := &ImportResult{In: in, Out: out, Devices: len(snap.Devices), Skipped: map[string]int{}}
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
	meta.Extra = map[string]string{}
	for k, v := range opts.Extra {
		meta.Extra[k] = v
	}
	// The recorded part of inferLimit's scan runs beside reconstruction.
	scans := make(chan []reservedScan, 1)
	go func() {
		out := make([]reservedScan, len(snap.Devices))
		for i, d := range snap.Devices {
			out[i] = scanReserved(d.Events)
		}
		scans <- out
	}()
	// Reconstruct first: the metadata records whether the history is complete.
	initial := make([][]trace.Event, len(snap.Devices))
	for i, d := range snap.Devices {
		initial[i], err = d.Reconstruct(conf.RoundSize)
		if err != nil {
			return nil, fmt.Errorf("import %s: device %d: %v", in, d.Index, err)
		}
		if len(initial[i]) > 0 {
			meta.Truncated = true
		}
		for k, n := range d.Skipped {
			res.Skipped[k] += n
		}
	}
	res.Truncated = meta.Truncated
	recorded := <-scans
	for _, d := range snap.Devices {
		tagPrivatePools(d)
	}
	// Validation (warnings only) runs beside the rest, on another core. It
	// reuses the start states Reconstruct derived.
	problems := make(chan []torchsnap.Problem, 1)
	go func() {
		var all []torchsnap.Problem
		for _, d := range snap.Devices {
			all = append(all, d.Validate()...)
		}
		problems <- all
	}()
	defer func() { res.Problems = <-problems }()
	if meta.MemoryLimit == 0 {
		if limit := inferLimit(initial, recorded); limit > 0 {
			meta.MemoryLimit = limit
			meta.Extra["memory_limit"] = "inferred: the recording's peak reserved, the smallest limit consistent with its OOMs"
			res.InferredLimit = limit
		}
	}
	var total int64
	for i, d := range snap.Devices {
		total += int64(len(initial[i]) + len(d.Events))
	}
	w, err := trace.Create(out, meta, trace.WriterOptions{Events: total})
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
	write := func(evs []trace.Event) error { return w.WriteEvents(evs, stackMap) }
	for i, d := range snap.Devices {
		if err := write(initial[i]); err != nil {
			w.Abort()
			return nil, fmt.Errorf("import %s: %v", in, err)
		}
		res.Reconstructed += int64(len(initial[i]))
		// The model annotates block sizes while the writer follows behind it.
		progress := make(chan int, 64)
		var mismatches int
		var annErr error
		go func() {
			mismatches, annErr = annotateBlockSizes(conf, meta.MemoryLimit, initial[i], d.Events, progress)
			close(progress)
		}()
		done := 0
		for upTo := range progress {
			if err == nil {
				err = write(d.Events[done:upTo])
			}
			done = upTo
		}
		if err == nil {
			err = annErr
		}
		if err == nil {
			err = write(d.Events[done:])
		}
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("import %s: device %d: %v", in, d.Index, err)
		}
		res.ModelMismatches += mismatches
	}
	res.Events = w.Events()
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("import %s: %v", in, err)
	}
	return res, nil
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
}

func scanReserved(evs []trace.Event) reservedScan {
	var s reservedScan
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
		case trace.KindOOM:
			s.ooms = true
		}
	}
	return s
}

// annotateBlockSizes fills Event.BlockSize of the recorded allocs and frees,
// which PyTorch does not record, from a replay of the recording under its own
// settings on the allocator model: while the model reproduces the recording
// (each replayed block at its recorded address), each of its blocks is the
// recorded block. It stops annotating at the first disagreement. It sends on
// progress how many of events are final, in order, so a writer can follow,
// and returns the number of mismatches the replay counted.
func annotateBlockSizes(conf allocator.Conf, limit int64, initial, events []trace.Event, progress chan<- int) (int, error) {
	sizeAt := make(map[uint64]int64, 1024)
	for _, ev := range initial {
		if ev.Kind == trace.KindAlloc {
			sizeAt[ev.Addr] = ev.BlockSize
		}
	}
	next, agree := 0, true
	const step = 4096
	// advance annotates the frees before the next recorded alloc.
	advance := func() {
		for ; next < len(events) && events[next].Kind != trace.KindAlloc; next++ {
			ev := &events[next]
			switch ev.Kind {
			case trace.KindFreeRequested:
				ev.BlockSize = sizeAt[ev.Addr]
			case trace.KindFreeCompleted:
				ev.BlockSize = sizeAt[ev.Addr]
				delete(sizeAt, ev.Addr)
			}
		}
	}
	obs := replay.ObserverFunc(func(ev *trace.Event) {
		if !agree || ev.Kind != trace.KindAlloc || ev.Flags&trace.FlagReconstructed != 0 {
			return
		}
		advance()
		if next >= len(events) || events[next].Addr != ev.Addr {
			agree = false // the model left the recording: sizes unknown from here
			return
		}
		events[next].BlockSize = ev.BlockSize
		sizeAt[ev.Addr] = ev.BlockSize
		if next++; next%step == 0 {
			progress <- next
		}
	})
	// Once the model has left the recording nothing more can be annotated:
	// stop the replay there (its mismatch count is then a lower bound).
	src := &untilSource{Source: &concatSource{parts: [][]trace.Event{initial, events}}, ok: &agree}
	res, err := replay.Run(context.Background(), src, replay.Options{Conf: conf, MemoryLimit: limit, Recorded: true}, obs)
	if err != nil {
		return 0, err
	}
	if agree {
		advance()
	}
	mismatches := 0
	for _, d := range res.Devices {
		mismatches += d.NumMismatches
	}
	return mismatches, nil
}

// tagPrivatePools sets Event.Pool on the allocations and segment events that
// lie in segments the snapshot reports as owned by a private pool (a CUDA
// graph capture or a MemPool). torch 2.11's trace entries carry no pool id;
// without it a replay would serve those requests from the default pools.
// Only segments alive at the dump are known: a private segment freed before
// it is not tagged.
func tagPrivatePools(d *torchsnap.Device) {
	var private []torchsnap.Segment
	for _, s := range d.Segments {
		if !s.Pool.IsDefault() {
			private = append(private, s)
		}
	}
	if len(private) == 0 {
		return
	}
	for i := range d.Events {
		ev := &d.Events[i]
		switch ev.Kind {
		case trace.KindAlloc, trace.KindSegmentAlloc, trace.KindSegmentMap:
			for _, s := range private {
				if ev.Addr >= s.Addr && ev.Addr < s.Addr+uint64(s.TotalSize) {
					ev.Pool = s.Pool
					break
				}
			}
		}
	}
}

// untilSource ends a Source as soon as *ok turns false.
type untilSource struct {
	replay.Source
	ok *bool
}

func (u *untilSource) Next() bool { return *u.ok && u.Source.Next() }

// concatSource yields the events of several slices in turn, without copying
// them into one (a large snapshot's events are hundreds of MB).
type concatSource struct {
	parts [][]trace.Event
	i     int
}

func (c *concatSource) Next() bool {
	for len(c.parts) > 0 {
		if c.i < len(c.parts[0]) {
			c.i++
			return true
		}
		c.parts, c.i = c.parts[1:], 0
	}
	return false
}

func (c *concatSource) Event() *trace.Event { return &c.parts[0][c.i-1] }
func (c *concatSource) Err() error          { return nil }
