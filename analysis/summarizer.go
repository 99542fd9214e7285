package analysis

import (
	"github.com/tracer-dev/tracer/trace"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/internal/ordered"
)

// Options configure a Summarizer. The zero value analyses device 0 with the
// defaults below.
type Options struct {
	// Device is the CUDA ordinal analysed; events of other devices are
	// skipped and counted in Summary.SkippedEvents.
	Device int32
	// Stacks resolves a StackID to its frames for Summary.Sites; nil leaves
	// Site.Frames empty.
	Stacks func(trace.StackID) trace.Stack
	// TopSites bounds Summary.Sites (default 10; negative keeps all).
	TopSites int
	// SiteFrames is how many innermost frames each Site keeps (default 4).
	SiteFrames int
	// TimelineBuckets bounds the timeline (default DefaultBuckets).
	TimelineBuckets int
	// MaxOOMs bounds Summary.OOMs (default 16).
	MaxOOMs int
	// Annotations are the trace's record_function scopes (trace.Meta), of
	// any device: the Summarizer takes Device's for Summary.Phases.
	Annotations []trace.Annotation
	// MemoryLimit is the per-process memory limit the events ran under, in
	// bytes (0 for none): an OOM's verdict compares the live bytes with it.
	MemoryLimit int64
	// FragmentationOnly computes only the Summary's Fragmentation, Peaks
	// and Stats, the same as without it, for a caller that uses no more
	// (tracer replay): no timeline (the maxima are kept as the events
	// come), sites, phases, lifetimes, grow, OOM details or segment layout;
	// and it keeps no block's stack, alloc event or time (State has none).
	FragmentationOnly bool
	// Blocks, if set, is about the most blocks live at once (tracer replay
	// guesses it from the trace's size): the table of live blocks is made
	// for them at once instead of doubled to that size, each doubling a
	// rehash of every block on the analysis's thread. It changes no result.
	Blocks int
	// OffHeap, if set, is where the table made for Blocks lies (outside
	// the Go heap: the collector does not count a guess's table, which a
	// trace of few blocks live hardly touches), for a caller that
	// releases it once done with the Summarizer and its Finalize.
	OffHeap *grow.OffHeap
	// Numbered says that the events' Ref numbers their blocks as
	// replay.BlockNumbers gives them: every alloc a number, the number
	// its address holds while a block there is live, a free the number
	// of its address (0 for an address no alloc named). The live blocks
	// are then kept in an array by number, each found with an index
	// where an address is hashed and probed for (a cache miss or two per
	// event in a large trace). It changes no result.
	Numbered bool
}

// Summarizer computes a Summary from events fed one at a time. Its memory is
// bounded by the live blocks, the segments, the stacks and the fixed-size
// timeline and histograms: never by the number of events.
type Summarizer struct {
	opt Options
	n   int64 // events analysed so far

	// v holds the byte series after the last event; External, Internal and
	// InactiveSplit are filled in by observe.
	v [numInt]int64

	nSegments, nBlocks       int64 // segment.all and allocation.all current
	peakSegments, peakBlocks int64
	nAllocs, nFrees          int64
	nDevAlloc, nDevFree      int64
	nOOMs                    int64
	peakSplitFixed           int64

	// Maxima of allocated and reserved, tracked per event for their side
	// effects (peak copies); the other maxima come from the timeline.
	peak       [Reserved + 1]Peak
	internalAt int64 // active − requested at the allocated peak

	live   blocks
	peeked slot // the sum of Events' peeks, kept so that they are made
	segs   segments
	sites  sites
	ph     *phases // nil when the device has no annotations
	phase  int32   // the phase of the event being folded in
	// misfits counts the live blocks not wholly inside the one segment
	// counting them (a corrupt trace); corrupt is set for good when an unmap
	// removed memory under blocks. Either makes largestFree sweep.
	misfits int64
	corrupt bool

	sitesStale bool // allocated hit a new maximum not yet copied into sites.atPeak

	// With Options.FragmentationOnly, the first event at each byte series'
	// maximum, in place of the timeline's.
	fragOnly bool
	maxAt    [numInt]Peak

	// The reserved peak's plateau: while reserved equals its maximum, the
	// most allocated bytes and the layout at that moment (taken lazily).
	plateauAlloc int64
	layoutStale  bool
	layoutAt     Peak
	layout       ordered.Map[int64, SegmentLayout] // by address; see snapshotLayout
	layoutCopies int                               // segments copied into layout, for the tests

	growRun  []extent // ranges reserved since the last non-segment event
	grow     Grow
	hasGrow  bool
	ooms     []OOM
	scratch  []extent
	lifeUs   histogram
	lifeEv   histogram
	nRecon   int64
	tl       timelineBuilder
	t0       int64
	hasTime  bool
	approx   bool
	unmatch  int64
	skipped  int64
	lastSeq  int64
	lastTime int64
}

// NewSummarizer returns a Summarizer with opt's settings.
func NewSummarizer(opt Options) *Summarizer {
	if opt.TopSites == 0 {
		opt.TopSites = 10
	}
	if opt.SiteFrames <= 0 {
		opt.SiteFrames = 4
	}
	if opt.MaxOOMs <= 0 {
		opt.MaxOOMs = 16
	}
	var s *Summarizer
	if opt.FragmentationOnly {
		s = &Summarizer{opt: opt, segs: newSegments(), fragOnly: true}
	} else {
		s = &Summarizer{opt: opt, tl: newTimelineBuilder(opt.TimelineBuckets), segs: newSegments(),
			ph: newPhases(opt.Annotations, opt.Device)}
	}
	s.live.numbered, s.live.full = opt.Numbered, !opt.FragmentationOnly
	s.live.reserve(opt.Blocks, opt.OffHeap)
	return s
}

// Event folds one event into the summary. Events must come in trace order.
func (s *Summarizer) Event(ev *trace.Event) {
	if ev.Device != s.opt.Device {
		s.skipped++
		return
	}
	if ev.TimeUs != 0 && !s.hasTime {
		s.hasTime, s.t0 = true, ev.TimeUs
	}
	s.lastSeq, s.lastTime = ev.Seq, ev.TimeUs
	if s.ph != nil {
		s.phase = s.ph.at(ev)
	}
	switch ev.Kind {
	case trace.KindAlloc:
		s.alloc(ev)
		s.growRun = s.growRun[:0]
	case trace.KindFreeRequested:
		s.growRun = s.growRun[:0]
		s.freeRequested(ev)
	case trace.KindFreeCompleted:
		s.growRun = s.growRun[:0]
		s.freeCompleted(ev)
	case trace.KindSegmentAlloc:
		s.v[Reserved] += ev.Size
		s.nSegments++
		s.peakSegments = max(s.peakSegments, s.nSegments)
		s.nDevAlloc++
		g := s.segs.newSegment()
		g.addr, g.size, g.stream = int64(ev.Addr), ev.Size, ev.Stream
		s.segs.insert(g)
		s.growRun = append(s.growRun, extent{int64(ev.Addr), int64(ev.Addr) + ev.Size})
	case trace.KindSegmentMap:
		s.v[Reserved] += ev.Size
		s.nDevAlloc++
		s.segs.mapRange(int64(ev.Addr), ev.Size, ev.Stream)
		s.growRun = append(s.growRun, extent{int64(ev.Addr), int64(ev.Addr) + ev.Size})
	case trace.KindSegmentFree:
		s.growRun = s.growRun[:0]
		s.willDecrease(false) // before the segment goes: a pending layout copy needs it
		s.segmentFree(int64(ev.Addr))
		s.v[Reserved] -= ev.Size
		s.nSegments--
		s.nDevFree++
	case trace.KindSegmentUnmap:
		s.growRun = s.growRun[:0]
		s.willDecrease(false)
		s.v[Reserved] -= ev.Size
		s.nDevFree++
		s.unmap(int64(ev.Addr), ev.Size)
	case trace.KindOOM:
		s.growRun = s.growRun[:0]
		s.oom(ev)
	default: // snapshot and unknown kinds change nothing
		s.growRun = s.growRun[:0]
	}
	s.observe(ev)
	if s.ph != nil {
		s.ph.event(s.phase, s.n, ev, s.v[Allocated], s.v[Reserved])
	}
	s.n++
}

// Events folds evs into the summary, in order, as Event does one at a time.
// It peeks at the block table's slots of the next few events before folding
// them in (blocks.peek), which a caller of Event cannot: on a table larger
// than the cache this saves most of a miss per event.
func (s *Summarizer) Events(evs []trace.Event) {
	if s.live.numbered {
		for i := range evs {
			s.Event(&evs[i])
		}
		return
	}
	for i := range evs {
		if i%peekAhead == 0 {
			var sum slot
			for j := i; j < min(i+peekAhead, len(evs)); j++ {
				sum += s.live.peek(int64(evs[j].Addr))
			}
			s.peeked += sum
		}
		s.Event(&evs[i])
	}
}

// peekAhead is how many events Events peeks at: enough cache misses to
// overlap, few enough lines to stay in L1 until the events are folded in.
const peekAhead = 16

// segmentFree removes the segment at addr (segment_free) for reuse.
func (s *Summarizer) segmentFree(addr int64) {
	g := s.segs.remove(addr)
	if g == nil {
		s.unmatch++
		return
	}
	if g.blocks > 0 {
		s.unmatch++ // its blocks were never freed: detach them
		s.live.inRange(g.addr, g.end(), func(b *block) {
			if b.inSeg {
				b.inSeg = false
				if !b.misfit {
					b.misfit = true
					s.misfits++
				}
				s.live.changed(b)
			}
		})
	}
	s.segs.pool = append(s.segs.pool, g)
}

func (s *Summarizer) blockSize(ev *trace.Event) int64 {
	if ev.BlockSize > 0 {
		return ev.BlockSize
	}
	s.approx = true
	return max((ev.Size+511)&^511, 512)
}

// lookup returns the live block ev (an alloc or free_*) names, or nil.
func (s *Summarizer) lookup(ev *trace.Event) *block {
	if s.live.numbered {
		return s.live.byNumber(int64(ev.Addr), ev.Ref)
	}
	return s.live.get(int64(ev.Addr))
}

func (s *Summarizer) alloc(ev *trace.Event) {
	addr := int64(ev.Addr)
	if s.live.numbered && ev.Ref <= 0 {
		s.unmatch++ // a numbered alloc without a number: nowhere to keep it
		return
	}
	if old := s.lookup(ev); old != nil {
		// A second alloc at a live address: the frees were lost. Drop the old block.
		s.unmatch++
		s.release(old, true)
	}
	bs := s.blockSize(ev)
	if len(s.growRun) > 0 && (!s.hasGrow || bs > int64(s.grow.BlockSize)) && !s.fragOnly {
		s.recordGrow(ev, bs)
	}
	g := s.segs.find(addr)
	misfit := g == nil || addr+bs > g.end()
	if misfit {
		s.misfits++
	}
	b := s.live.put(block{addr: addr, size: bs, req: ev.Size, inSeg: g != nil, misfit: misfit,
		recon:   ev.Flags&trace.FlagReconstructed != 0,
		pending: ev.Flags&trace.FlagPending != 0},
		blockInfo{allocN: s.n, allocT: ev.TimeUs, stack: ev.Stack, phase: s.phase}, ev.Ref)
	s.v[Active] += bs
	s.v[Requested] += ev.Size
	var allocd int64
	if !b.pending {
		allocd = bs
		s.v[Allocated] += bs
		s.nBlocks++
		s.peakBlocks = max(s.peakBlocks, s.nBlocks)
		s.nAllocs++
		if !s.fragOnly {
			s.sites.add(s.live.site(b), bs, ev.Size, 1)
		}
		if s.ph != nil {
			s.ph.alloc(s.phase, bs)
		}
	}
	if g != nil {
		s.segs.addBlock(g, allocd, bs, 1)
	}
}

func (s *Summarizer) freeRequested(ev *trace.Event) {
	b := s.lookup(ev)
	if b == nil || b.pending {
		s.unmatch++
		return
	}
	s.unallocate(b)
}

// unallocate moves b from allocated to pending free (free_requested).
func (s *Summarizer) unallocate(b *block) {
	s.willDecrease(true)
	s.v[Allocated] -= b.size
	s.nBlocks--
	s.nFrees++
	if s.fragOnly {
		b.pending = true
		s.live.changed(b)
		if g := s.blockSegment(b); g != nil {
			s.segs.addBlock(g, -b.size, 0, 0)
		}
		return
	}
	info := s.live.info(b)
	s.sites.add(s.live.site(b), -b.size, -b.req, -1)
	if s.ph != nil {
		s.ph.free(info.phase, b.size)
	}
	b.pending = true
	s.live.changed(b)
	if g := s.blockSegment(b); g != nil {
		s.segs.addBlock(g, -b.size, 0, 0)
	}
	if b.recon {
		s.nRecon++
	} else if s.hasTime && info.allocT != 0 {
		s.lifeUs.add(s.lastTime-info.allocT, b.size)
	} else {
		s.lifeEv.add(s.n-info.allocN, b.size)
	}
}

func (s *Summarizer) freeCompleted(ev *trace.Event) {
	b := s.lookup(ev)
	if b == nil {
		s.unmatch++
		return
	}
	s.release(b, false)
}

// release removes b entirely (free_completed), first unallocating it if the
// free_requested was missing.
func (s *Summarizer) release(b *block, lost bool) {
	if !b.pending {
		if !lost {
			s.unmatch++ // free_completed without free_requested
		}
		s.unallocate(b)
	}
	s.v[Active] -= b.size
	s.v[Requested] -= b.req
	if g := s.blockSegment(b); g != nil {
		s.segs.addBlock(g, 0, -b.size, -1)
	} else if g := s.segs.find(b.addr); g != nil {
		s.segs.touch(g) // its free space changed
	}
	if b.misfit {
		s.misfits--
	}
	s.live.remove(b)
}

// willDecrease is called before allocated (or reserved) bytes decrease: the
// moment a stale peak copy must be taken, since the state is still the peak's.
func (s *Summarizer) willDecrease(allocated bool) {
	if allocated && s.sitesStale {
		s.sites.snapshot()
		if s.ph != nil {
			s.ph.snapshot()
		}
		s.sitesStale = false
	}
	if s.layoutStale {
		s.snapshotLayout()
	}
}

func (s *Summarizer) recordGrow(ev *trace.Event, bs int64) {
	var added int64
	for _, e := range s.growRun {
		added += e.end - e.addr
	}
	// The state already holds the new memory; count it as occupied to see
	// the free space the request found before the grow.
	any, same := s.largestFree(ev.Stream, s.growRun)
	s.hasGrow = true
	s.grow = Grow{Event: s.n, Seq: ev.Seq, TimeUs: ev.TimeUs, Requested: Bytes(ev.Size),
		BlockSize: Bytes(bs), Stream: ev.Stream, Stack: ev.Stack, NewBytes: Bytes(added),
		LargestFree: Bytes(any), LargestFreeStream: Bytes(same)}
}

func (s *Summarizer) oom(ev *trace.Event) {
	s.nOOMs++
	if len(s.ooms) >= s.opt.MaxOOMs || s.fragOnly {
		return
	}
	any, same := s.largestFree(ev.Stream, nil)
	s.ooms = append(s.ooms, OOM{Event: s.n, Seq: ev.Seq, TimeUs: ev.TimeUs, Request: Bytes(ev.Size),
		Stream: ev.Stream, Stack: ev.Stack, DeviceFree: Bytes(ev.Addr),
		Reserved: Bytes(s.v[Reserved]), Allocated: Bytes(s.v[Allocated]),
		CacheFree: Bytes(s.v[Reserved] - s.v[Allocated]), LargestFree: Bytes(any), LargestFreeStream: Bytes(same)})
	s.oomVerdict(&s.ooms[len(s.ooms)-1])
}

// observe updates peaks and the timeline with the state after ev.
func (s *Summarizer) observe(ev *trace.Event) {
	v := &s.v
	v[External] = v[Reserved] - v[Allocated]
	v[Internal] = v[Active] - v[Requested]
	v[InactiveSplit] = s.segs.split
	if v[Allocated] > int64(s.peak[Allocated].Bytes) {
		s.newPeak(Allocated, v[Allocated], ev)
	}
	if v[Reserved] > int64(s.peak[Reserved].Bytes) {
		s.newPeak(Reserved, v[Reserved], ev)
	}
	if v[Reserved] == int64(s.peak[Reserved].Bytes) && v[Allocated] > s.plateauAlloc {
		s.plateauAlloc = v[Allocated]
		s.layoutStale = !s.fragOnly
		s.layoutAt = Peak{Bytes: Bytes(v[Reserved]), Event: s.n, Seq: ev.Seq, TimeUs: ev.TimeUs}
	}
	s.peakSplitFixed = max(s.peakSplitFixed, s.segs.splitFixed)
	if s.fragOnly {
		s.maxima(ev)
		return
	}
	s.tl.add(s.n, ev.Seq, ev.TimeUs, v)
}

// maxima keeps the first event at the maximum of each byte series that
// Finalize takes from the timeline, as the timeline's Max finds it
// (Options.FragmentationOnly); one comparison each per event.
func (s *Summarizer) maxima(ev *trace.Event) {
	v := &s.v
	if s.n == 0 {
		for _, i := range []Series{Active, Requested, External, Internal, InactiveSplit} {
			s.newMax(i, ev)
		}
		return
	}
	if v[Active] > int64(s.maxAt[Active].Bytes) {
		s.newMax(Active, ev)
	}
	if v[Requested] > int64(s.maxAt[Requested].Bytes) {
		s.newMax(Requested, ev)
	}
	if v[External] > int64(s.maxAt[External].Bytes) {
		s.newMax(External, ev)
	}
	if v[Internal] > int64(s.maxAt[Internal].Bytes) {
		s.newMax(Internal, ev)
	}
	if v[InactiveSplit] > int64(s.maxAt[InactiveSplit].Bytes) {
		s.newMax(InactiveSplit, ev)
	}
}

func (s *Summarizer) newMax(i Series, ev *trace.Event) {
	s.maxAt[i] = Peak{Bytes: Bytes(s.v[i]), Event: s.n, Seq: ev.Seq, TimeUs: ev.TimeUs}
}

func (s *Summarizer) newPeak(i Series, x int64, ev *trace.Event) {
	s.peak[i] = Peak{Bytes: Bytes(x), Event: s.n, Seq: ev.Seq, TimeUs: ev.TimeUs}
	if s.ph != nil {
		s.ph.peakAt[i] = s.phase
	}
	switch i {
	case Allocated:
		s.sitesStale = !s.fragOnly
		s.internalAt = s.v[Active] - s.v[Requested]
	case Reserved:
		s.plateauAlloc = -1 // the plateau restarts; observe takes it
	}
}
