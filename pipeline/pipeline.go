// Package pipeline wires the stages together for the commands: it opens a
// trace (or the built-in sample), resolves the allocator settings a replay
// runs under (the recorded ones, overridden by flags), and runs
// trace → replay → analysis in one streaming pass per replay. It holds no
// algorithms of its own; those live in replay and analysis.
package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/record/sample"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// Input is a trace to read, possibly several times (once per replay).
type Input struct {
	Name   string // the path, or sample.Name
	Path   string // "" for the built-in sample
	Sample bool
	Meta   trace.Meta
	// Warn, when set, receives warnings about the input, once each: a trace
	// cut short (a killed recording) is read up to its last whole batch, and
	// a user must know the figures cover only that part.
	Warn func(msg string)

	cutOnce sync.Once
}

// noteFacts warns, once, when a pass over the input found it cut short.
func (in *Input) noteFacts(f *trace.Facts) {
	if !f.Truncated || in.Warn == nil {
		return
	}
	in.cutOnce.Do(func() {
		in.Warn(fmt.Sprintf("%s ends without its end-of-stream marker (a killed recording?): using the %s events of its whole batches",
			in.Name, analysis.Count(f.Events)))
	})
}

// Open checks that path is a readable trace and reads its metadata. An
// empty path selects the built-in sample.
func Open(path string) (*Input, error) {
	in := &Input{Name: path, Path: path}
	if path == "" {
		in.Name, in.Sample = sample.Name, true
	}
	rd, err := in.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	in.Meta = rd.Meta()
	return in, nil
}

// Reader opens a new reader over the input.
func (in *Input) Reader() (*trace.Reader, error) {
	if in.Sample {
		return trace.NewReader(bytes.NewReader(sample.Bytes()), "built-in sample")
	}
	if st, err := os.Stat(in.Path); err == nil && !st.IsDir() && !st.Mode().IsRegular() {
		// A FIFO would block the open until a writer comes, and a trace
		// is read more than once (a replay beside the analysis).
		return nil, fmt.Errorf("%s is not a regular file (%s): a trace is read more than once; save it to a file first", in.Path, kindOf(st.Mode()))
	} else if err == nil && !st.IsDir() && st.Size() > 0 {
		if looksLikeSnapshot(in.Path) {
			return nil, fmt.Errorf("%s: this is a PyTorch snapshot, not a trace: run 'tracer import %s' first", in.Path, in.Path)
		}
	}
	return trace.Open(in.Path)
}

// kindOf names a file type that is neither a regular file nor a directory.
func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a plain file"
}

// looksLikeSnapshot recognises a pickle (0x80 protocol byte) or a JSON
// document, the formats `tracer import` reads, so the error can say so.
func looksLikeSnapshot(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [1]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return false
	}
	return b[0] == 0x80 || b[0] == '{' || b[0] == '['
}

// Settings are what a user may change for a replay. Zero values keep the
// recorded settings.
type Settings struct {
	Conf string // PYTORCH_CUDA_ALLOC_CONF keys applied over the recorded string
	// FromDefaults applies Conf over PyTorch's defaults instead: the
	// recorded keys that Conf does not name are dropped.
	FromDefaults bool
	Round        int64 // rounding quantum (kMinBlockSize); 0 keeps 512
	Limit        int64 // per-process memory limit in bytes; 0 keeps the recorded one, <0 removes it
	Total        int64 // simulated device memory in bytes; 0 = the recorded device's, else 80 GiB
}

// Resolved is a complete replay configuration.
type Resolved struct {
	Conf     allocator.Conf
	Limit    int64 // bytes; 0 = none
	Total    int64
	Recorded bool // identical to the recording's settings: exact comparison applies
	// FillsLimit: the recorded settings but for a limit that the trace does
	// not know (LimitUnknown), which these give: if it is the run's, a
	// replay with Recorded set reproduces the recording (tracer replay
	// tries that first).
	FillsLimit bool
	// InferEmptyCaches, with Recorded, has the replay infer the program's
	// empty_cache() calls on the model instead of taking the trace's rows
	// (replay.Options.InferEmptyCaches): a fill-in of the run's limit does,
	// since the import decided the rows without it.
	InferEmptyCaches bool
	Label            string // human-readable, e.g. "expandable_segments:True, round 4096"
}

// LimitUnknown reports whether the trace does not know the run's
// per-process memory limit: a PyTorch snapshot stores none, so an import
// without --fraction has either none or one inferred from its OOMs.
func (in *Input) LimitUnknown() bool {
	m := &in.Meta
	if m.Source != trace.SourceSnapshot && m.Source != trace.SourcePythonProgram {
		return false
	}
	return m.MemoryFraction == 0 && (m.MemoryLimit == 0 || strings.HasPrefix(m.Extra["memory_limit"], "inferred"))
}

// Resolve applies s over the input's recorded settings.
func (in *Input) Resolve(s Settings) (Resolved, error) {
	recorded := in.Meta.AllocConf
	conf, err := parseConf(recorded)
	if err != nil {
		return Resolved{}, fmt.Errorf("%s: recorded PYTORCH_CUDA_ALLOC_CONF %s: %v", in.Name, Clip(recorded), err)
	}
	r := Resolved{Total: in.Meta.DeviceTotal, Limit: in.Meta.MemoryLimit}
	over := recorded
	if s.FromDefaults {
		over = ""
		if conf, err = parseConf(""); err != nil {
			return Resolved{}, err
		}
	}
	if s.Conf != "" {
		over, user, err := applyUnsets(over, s.Conf)
		if err != nil {
			return Resolved{}, &SettingsError{fmt.Errorf("--conf %s: %v", Clip(s.Conf), err)}
		}
		merged := user
		if over != "" && user != "" {
			merged = over + "," + user
		} else if over != "" {
			merged = over
		}
		if conf, err = parseConf(merged); err != nil {
			return Resolved{}, &SettingsError{fmt.Errorf("--conf %s: %v%s", Clip(s.Conf), err, unsetHint(s.Conf))}
		}
	}
	if s.Round != 0 {
		conf.MinBlockSize = s.Round
	}
	if err := conf.Validate(); err != nil {
		return Resolved{}, &SettingsError{err}
	}
	switch {
	case s.Limit > 0:
		r.Limit = s.Limit
	case s.Limit < 0:
		r.Limit = 0
	}
	if s.Total > 0 {
		r.Total = s.Total
	}
	if r.Total == 0 {
		r.Total = 80 << 30
	}
	r.Conf = conf
	base, _ := parseConf(recorded)
	r.Recorded = confEqual(conf, base) && r.Limit == in.Meta.MemoryLimit
	r.FillsLimit = confEqual(conf, base) && r.Limit > 0 && r.Limit != in.Meta.MemoryLimit && in.LimitUnknown()
	r.Label = label(conf, r.Limit)
	return r, nil
}

// SettingsError is a problem with the settings asked for (a command's
// flags), not with the trace: a usage error.
type SettingsError struct{ Err error }

func (e *SettingsError) Error() string { return e.Err.Error() }
func (e *SettingsError) Unwrap() error { return e.Err }

// Clip quotes s for an error message, cut to its first 80 bytes (and its
// length) when longer: a conf string may be any size.
func Clip(s string) string {
	const keep = 80
	if len(s) <= keep {
		return strconv.Quote(s)
	}
	cut := keep
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// RecordedSettings are the settings the trace was recorded under.
func (in *Input) RecordedSettings() (Resolved, error) { return in.Resolve(Settings{}) }

// parseConf parses PYTORCH_CUDA_ALLOC_CONF syntax plus the model constants
// that allocator.Conf.String writes as "tracer_*" keys (a replay with
// --round 4096 records "tracer_round:4096"), which PyTorch would reject.
func parseConf(s string) (allocator.Conf, error) {
	var torch, ours []string
	for _, kv := range strings.Split(s, ",") {
		if strings.HasPrefix(strings.TrimSpace(kv), "tracer_") {
			ours = append(ours, strings.TrimSpace(kv))
		} else if strings.TrimSpace(kv) != "" {
			torch = append(torch, kv)
		}
	}
	c, err := allocator.ParseConf(strings.Join(torch, ","))
	if err != nil {
		return c, err
	}
	for _, kv := range ours {
		k, v, _ := strings.Cut(kv, ":")
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return c, fmt.Errorf("%s: want an integer, got %q", k, v)
		}
		field, ok := modelKeys[k]
		if !ok {
			return c, fmt.Errorf("unrecognized key %q (model constants: tracer_round, tracer_small_size, tracer_small_segment, tracer_min_large_alloc, tracer_large_rounding)", k)
		}
		*field(&c) = n
	}
	return c, c.Validate()
}

// modelKeys are the allocator constants (spec §2) a what-if replay may set,
// in bytes, with PYTORCH_CUDA_ALLOC_CONF syntax: "tracer_round:4096" asks
// what the run would reserve if kMinBlockSize were 4096.
var modelKeys = map[string]func(*allocator.Conf) *int64{
	"tracer_round":           func(c *allocator.Conf) *int64 { return &c.MinBlockSize },  // kMinBlockSize, 512
	"tracer_small_size":      func(c *allocator.Conf) *int64 { return &c.SmallSize },     // kSmallSize, 1 MiB
	"tracer_small_segment":   func(c *allocator.Conf) *int64 { return &c.SmallBuffer },   // kSmallBuffer, 2 MiB
	"tracer_min_large_alloc": func(c *allocator.Conf) *int64 { return &c.MinLargeAlloc }, // kMinLargeAlloc, 10 MiB
	"tracer_large_rounding":  func(c *allocator.Conf) *int64 { return &c.RoundLarge },    // kRoundLarge, 2 MiB
}

func confEqual(a, b allocator.Conf) bool {
	a.Raw, b.Raw = "", ""
	return a == b
}

func label(c allocator.Conf, limit int64) string {
	var parts []string
	if s := c.String(); s != "" {
		// Model constants read better as the flags that set them.
		parts = append(parts, strings.ReplaceAll(s, "tracer_round:", "--round "))
	}
	// Conf.String renders tracer_round; name the other model constants too.
	def := allocator.DefaultConf()
	for _, k := range []string{"tracer_small_size", "tracer_small_segment", "tracer_min_large_alloc", "tracer_large_rounding"} {
		if v := *modelKeys[k](&c); v != *modelKeys[k](&def) {
			parts = append(parts, fmt.Sprintf("%s:%d", k, v))
		}
	}
	if limit > 0 {
		parts = append(parts, "limit "+analysis.Bytes(limit).String())
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, ", ")
}

// Options tune a Replay.
type Options struct {
	Analysis analysis.Options // Device and Stacks are set per device
	// Out, when set, receives the replayed events (with their stacks).
	Out *trace.Writer
	// NewDevice builds a device per ordinal; nil uses simulated devices.
	NewDevice func(device int32) allocator.Device
	// Replayer, when set, replays, reusing the memory of its previous
	// replay (replay.Replayer): for replays of one input one after another.
	// The Run's Result is then valid until the Replayer's next replay, and
	// replays that run at once must not share it.
	Replayer *replay.Replayer
	// SkipCompare, for a replay under the recorded settings, compares
	// nothing with the recording (replay.Options.SkipCompare: no
	// mismatches counted), for a caller that prints none; the replay
	// itself is the same.
	SkipCompare bool
	// Observe, when set, sees every replayed event, in order, on the
	// analysis goroutine (the event is reused: copy what it keeps). Stack
	// IDs refer to Run.Stacks.
	Observe func(ev *trace.Event)
}

// Run is the outcome of one replay of an input.
type Run struct {
	Settings  Resolved
	Result    *replay.Result
	Summaries []*analysis.Summary // one per device, by ordinal
	Facts     trace.Facts         // of the input, as recorded
	// OOMStacks holds the stacks of the failed requests in Result.
	OOMStacks map[trace.StackID]trace.Stack
	// Stacks is the input's stack table, which the replayed events' stack
	// IDs index.
	Stacks []trace.Stack
}

// Replay replays the input once under s and analyzes the replayed events.
// Decoding, the model and the analysis run on three goroutines (see
// stream.go).
func Replay(ctx context.Context, in *Input, s Resolved, opt Options) (*Run, error) {
	runs, err := ReplayEach(ctx, in, []Resolved{s}, []Options{opt})
	if err != nil {
		return nil, err
	}
	return runs[0], nil
}

// ReplayEach replays the input under each of settings at once, with the
// options of the same index, as Replay does each: the replays read and
// number the trace once, and share its events. The error is the first
// failed replay's, in order. Replays that run at once must not share a
// Replayer (Options.Replayer).
func ReplayEach(ctx context.Context, in *Input, settings []Resolved, opts []Options) ([]*Run, error) {
	if len(opts) != len(settings) {
		return nil, fmt.Errorf("pipeline: %d settings with %d options", len(settings), len(opts))
	}
	if len(settings) == 0 {
		return nil, nil
	}
	for _, s := range settings {
		if err := s.Conf.Modelled(); err != nil {
			return nil, fmt.Errorf("%s: %v", in.Name, err)
		}
	}
	rd, err := in.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	report := OnStages
	start := time.Now()
	var facts trace.Facts
	reps := make([]tapReplay, len(settings))
	for i := range reps {
		reps[i].prep = prepareModel(in, settings[i], opts[i])
	}
	defer func() { // the summaries' tables, where finish did not give them back (an error)
		for i := range reps {
			if reps[i].off != nil {
				reps[i].off.Release()
			}
		}
	}()
	fill := 0
	if reps[0].prep != nil { // a trace file of prepareMin bytes or more
		fill = readFill(reps[0].prep.size)
	}
	src := startReadAhead(ctx, rd, &facts, false, true, report != nil, len(settings), fill)
	defer src.close()
	each(len(settings), func(i int) { reps[i].replay(ctx, in, settings[i], opts[i], src.taps[i], report != nil) })
	src.close()
	for i := range reps {
		if reps[i].err != nil {
			return nil, fmt.Errorf("%s: %w", in.Name, reps[i].err)
		}
		if reps[i].obs.err != nil {
			return nil, reps[i].obs.err
		}
	}
	in.noteFacts(&facts)
	runs := make([]*Run, len(reps))
	each(len(reps), func(i int) { runs[i] = reps[i].finish(rd, settings[i], facts, report != nil) })
	if report != nil {
		for i, r := range reps {
			report(StageTimes{Label: settings[i].Label, Read: src.read, Decoders: src.decoders, Decoded: src.decoded, Number: src.numbered + slices.Max(append(src.numberParts, 0)), Model: r.model,
				Analysis: r.behind.cpu, AnalysisNumber: r.obs.numCPU, Finalize: r.final, Wall: time.Since(start), ModelFaults: r.faults, AnalysisFaults: r.behind.faults})
		}
	}
	return runs, nil
}

// each calls f(0), ..., f(n-1) at once, the last on the calling goroutine,
// and returns when all have.
func each(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	f(n - 1)
	wg.Wait()
}

// tapReplay is one of ReplayEach's replays: the model on the caller's
// goroutine, fed by its tap of the reader, and the analysis behind it.
type tapReplay struct {
	prep         *modelPrep    // the model's memory, made before it (nil: none)
	off          *grow.OffHeap // the summaries' tables, made for prep's guess, until finish
	res          *replay.Result
	obs          *fanout
	behind       *analyzeBehind
	err          error
	model, final time.Duration // CPU, when timed
	faults       int64         // the model's thread's minor faults, when timed
}

func (r *tapReplay) replay(ctx context.Context, in *Input, s Resolved, opt Options, src *tap, timed bool) {
	clock := startClock(timed)
	defer clock.stop()
	opt.Analysis.MemoryLimit = s.Limit             // the OOM verdicts compare with it
	opt.Analysis.Annotations = in.Meta.Annotations // a replay keeps the requests' times
	if r.prep != nil {
		// Half the model's guess: the summarizer's slab, the rest of it
		// chunks made as reached. A guess, so outside the collector's
		// count (r.off, given back in finish): a trace of few blocks
		// live touches a chunk of it.
		opt.Analysis.Blocks = r.prep.blocks / 2
		r.off = new(grow.OffHeap)
		opt.Analysis.OffHeap = r.off
	}
	r.obs = newFanout(opt)
	if r.prep != nil {
		// 5/8 of the guess: the numbering's table (or each part's)
		// holds up to 3/4 of its slots, a power of two. Made for half,
		// it doubles on seed1m.trace (1M blocks live of a guess of
		// 1.34M), old and new tables resident at once; for the whole,
		// small.trace's is twice what its 300k blocks need. Made once
		// the numbering outgrows a small table (ReserveOff), outside
		// the collector's count.
		r.obs.numberBlocks = r.prep.blocks * 5 / 8
	}
	r.behind = startAnalyzeBehind(r.obs, src, timed, r.prep != nil)
	if r.prep != nil {
		opt.Replayer = r.prep.replayer(&src.ra.top, src.wake)
		defer r.prep.finish()
	}
	run1 := replay.Run
	if opt.Replayer != nil {
		run1 = opt.Replayer.Run
	}
	r.res, r.err = run1(ctx, src, replay.Options{
		Conf:        s.Conf,
		TotalMemory: s.Total,
		MemoryLimit: s.Limit,
		Recorded:    s.Recorded,
		SkipCompare: opt.SkipCompare,
		NewDevice:   opt.NewDevice,
		// The trace's empty_cache rows, when it says it has them, are the
		// program's calls; otherwise the replay infers them.
		EmptyCacheRows:     in.Meta.EmptyCacheRows,
		InferEmptyCaches:   s.InferEmptyCaches,
		EmptyCacheAfterOOM: in.Meta.Extra[trace.ExtraEmptyCacheAfterOOM] != "",
		Numbered:           true, // by src
	}, r.behind)
	r.model, r.faults = clock.lapFaults()
	src.leave() // the reader need not wait for a replay that stopped early
	r.behind.close()
}

// finish makes the Run, once the reader is done with rd.
func (r *tapReplay) finish(rd *trace.Reader, s Resolved, facts trace.Facts, timed bool) *Run {
	clock := startClock(timed)
	defer clock.stop()
	r.obs.stacks = rd.Stacks()
	run := &Run{Settings: s, Result: r.res, Facts: facts, Summaries: r.obs.summaries(), Stacks: r.obs.stacks,
		OOMStacks: map[trace.StackID]trace.Stack{}}
	for _, d := range r.res.Devices {
		for _, o := range d.OOMs {
			if o.Stack != trace.NoStack {
				run.OOMStacks[o.Stack] = rd.Stack(o.Stack)
			}
		}
	}
	if r.off != nil {
		// Behind: the Run is made, and the caller need not wait for the
		// tables' pages to be freed.
		unmapBehind(r.off)
		r.off = nil
	}
	r.final = clock.lap()
	return run
}

// fanout sends each event to its device's summarizer and to the output
// trace. It resolves stacks in stacks, the table of the events it has been
// handed so far.
type fanout struct {
	opt      Options
	stacks   []trace.Stack
	byDevice map[int32]*analysis.Summarizer
	last     *analysis.Summarizer
	lastDev  int32
	stackIDs map[trace.StackID]trace.StackID
	err      error
	// numbered: the events' Ref numbers their blocks (numberAhead), and
	// the summarizers keep them by number (analysis.Options.Numbered).
	numbered bool
	parts    *replay.PartNumbers
	// numberBlocks is about the most blocks live at once, for the
	// numbering's table (0: unknown).
	numberBlocks int
	numCPU       time.Duration // the numbering's CPU, when timed: its goroutine's and its longest part's
}

func newFanout(opt Options) *fanout {
	return &fanout{opt: opt, byDevice: map[int32]*analysis.Summarizer{}}
}

func (f *fanout) stack(id trace.StackID) trace.Stack {
	if id < 0 || int(id) >= len(f.stacks) {
		return nil
	}
	return f.stacks[id]
}

// summarizer returns device d's summarizer, made on its first event.
func (f *fanout) summarizer(d int32) *analysis.Summarizer {
	s := f.last
	if s == nil || d != f.lastDev {
		s = f.byDevice[d]
		if s == nil {
			o := f.opt.Analysis
			o.Device = d
			o.Stacks = f.stack
			o.Numbered = f.numbered
			s = analysis.NewSummarizer(o)
			f.byDevice[d] = s
		}
		f.last, f.lastDev = s, d
	}
	return s
}

// numberAhead numbers the blocks of the batches that come in full
// (replay.BlockNumbers; on many cores in parts, replay.PartNumbers) on
// goroutines of their own, and hands them on, in order, in the channel it
// returns, closed after the last; the receiver calls numbersDone for each
// before it reads its events. The summarizers then find each event's
// block by its number (analysis.Options.Numbered), an array index, where
// they would hash its address and take the table's cache misses on the
// analysis's thread. Its table is made for f.numberBlocks blocks, if set.
// It must be called before the first event; when timed, the
// numbering's CPU time is in f.numCPU once the channel is closed.
func (f *fanout) numberAhead(full <-chan *batch, timed bool) <-chan *batch {
	f.numbered = true
	f.parts = replay.NewPartNumbers(replay.NumberParts(runtime.GOMAXPROCS(0)), timed)
	out := make(chan *batch, 1)
	go func() {
		defer close(out)
		clock := startClock(timed)
		// The table made for the guess outside the Go heap, given back
		// once the last batch is numbered, behind: the analysis's end
		// waits for this goroutine's.
		off := new(grow.OffHeap)
		defer func() {
			f.parts.Close()
			unmapBehind(off)
			f.numCPU = clock.stop() + slices.Max(f.parts.PartCPU())
		}()
		if f.numberBlocks > 0 {
			f.parts.ReserveOff(f.opt.Analysis.Device, f.numberBlocks, off)
		}
		for b := range full {
			if b.raw {
				b.evs = b.emitted.Events(b.evs[:0])
			}
			f.parts.Start(b.evs)
			out <- b
		}
	}()
	return out
}

// numbersDone waits until the oldest batch numberAhead handed on and not
// yet waited for is numbered.
func (f *fanout) numbersDone() { f.parts.Done() }

// events is Event of each of evs, which hands each run of events of one
// device to its summarizer at once (Summarizer.Events) when nothing else
// sees them.
func (f *fanout) events(evs []trace.Event) {
	if f.opt.Observe != nil || f.opt.Out != nil {
		for i := range evs {
			f.Event(&evs[i])
		}
		return
	}
	for len(evs) > 0 {
		d, n := evs[0].Device, 1
		for n < len(evs) && evs[n].Device == d {
			n++
		}
		f.summarizer(d).Events(evs[:n])
		evs = evs[n:]
	}
}

func (f *fanout) Event(ev *trace.Event) {
	f.summarizer(ev.Device).Event(ev)
	if f.opt.Observe != nil {
		f.opt.Observe(ev)
	}
	if f.opt.Out != nil && f.err == nil {
		out := *ev
		if out.Stack != trace.NoStack {
			if f.stackIDs == nil {
				f.stackIDs = map[trace.StackID]trace.StackID{}
			}
			id, ok := f.stackIDs[out.Stack]
			if !ok {
				id = f.opt.Out.AddStack(f.stack(out.Stack))
				f.stackIDs[out.Stack] = id
			}
			out.Stack = id
		}
		f.err = f.opt.Out.Write(&out)
	}
}

// Analyze summarizes the input's recorded events as they are, one Summary
// per device, with no replay. Traces from `tracer import` carry the block
// sizes the allocator model gave the recorded allocations, so the summaries
// are exact; Summary.Approximate says when some were missing. Decoding runs
// on a goroutine of its own, beside the summaries.
func Analyze(ctx context.Context, in *Input, opt analysis.Options) ([]*analysis.Summary, trace.Facts, error) {
	var facts trace.Facts
	rd, err := in.Reader()
	if err != nil {
		return nil, facts, err
	}
	defer rd.Close()
	src := startReadAhead(ctx, rd, &facts, true, false, false, 1, 0)
	defer src.close()
	opt.Annotations = in.Meta.Annotations
	if opt.MemoryLimit == 0 {
		opt.MemoryLimit = in.Meta.MemoryLimit
	}
	obs := newFanout(Options{Analysis: opt})
	for evs := src.NextBatch(); len(evs) > 0; evs = src.NextBatch() {
		obs.events(evs)
	}
	src.close()
	if err := src.Err(); err != nil {
		return nil, facts, err
	}
	in.noteFacts(&facts)
	obs.stacks = rd.Stacks()
	return obs.summaries(), facts, nil
}

// summaries finalizes the per-device summarizers, by ordinal.
func (f *fanout) summaries() []*analysis.Summary {
	devs := make([]int32, 0, len(f.byDevice))
	for d := range f.byDevice {
		devs = append(devs, d)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i] < devs[j] })
	out := make([]*analysis.Summary, len(devs))
	for i, d := range devs {
		out[i] = f.byDevice[d].Finalize()
	}
	return out
}
