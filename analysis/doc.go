// Package analysis summarises a stream of allocator events (recorded from
// PyTorch's CUDA caching allocator or replayed on the model in package
// allocator) into a Summary: peaks, memory_stats counters, fragmentation,
// what was live at the peak and where it came from, the segment layout,
// allocation lifetimes, OOMs and the program's phases, with a bounded
// timeline for plots.
//
// # Use
//
//	s := analysis.NewSummarizer(analysis.Options{Stacks: tr.Stack})
//	for rd.Next() {
//		s.Event(rd.Event())
//	}
//	sum := s.Finalize()
//	analysis.WriteText(os.Stdout, sum, 10)
//
// A Summarizer reads one device (Options.Device) and keeps state for the
// live blocks, the segments and the stacks, plus fixed-size timeline and
// histograms: never per event, so a trace of any length streams through.
//
// Summaries of several runs compare: Ranks tabulates the ranks of a
// distributed run (RankTable: which rank peaks highest, and by how much),
// and Compare diffs two runs, site by site at the allocated peak (Diff).
//
// # Block sizes
//
// For alloc and free_* events, Event.Size is the requested size and
// Event.BlockSize the block the allocator handed out (rounded, maybe larger
// when a remainder was too small to split). Replayed events always carry
// BlockSize; PyTorch's trace entries do not, and then the block size is the
// request rounded up to a multiple of 512 B (at least 512 B), which
// undercounts blocks that PyTorch rounds further or leaves unsplit.
// Summary.Approximate says when that happened.
//
// # Series
//
// After every event the Summarizer knows, as spec §11 defines them:
//
//   - allocated: Σ block sizes of allocated blocks, from alloc to
//     free_requested (allocated_bytes).
//   - active: allocated plus pending-free blocks, freed by the caller but
//     awaiting a cross-stream event, from alloc to free_completed
//     (active_bytes).
//   - requested: Σ requested sizes, from alloc to free_completed
//     (requested_bytes).
//   - reserved: Σ segment_alloc sizes and mapped expandable bytes, less
//     segment_free and segment_unmap (reserved_bytes).
//
// # Fragmentation
//
// Internal fragmentation is rounding waste: active − requested. Both sides
// span alloc to free_completed, so it is never negative; it equals
// allocated − requested when no free is pending. Reported at the allocated
// peak (Fragmentation.InternalAtPeak), as its maximum, and over time.
//
// External fragmentation is reserve the caller cannot use: reserved −
// allocated. Reported three ways:
//
//   - At the reserved peak (Fragmentation.ExternalAtReservedPeak): the
//     reserved peak minus the most bytes allocated while reserved stayed at
//     that peak. Taking the fullest moment of the plateau, rather than the
//     moment the peak was reached (just before the alloc that needed the
//     new segment), measures reserve that was never used at the peak.
//     ExternalRatio divides it by the reserved peak.
//   - Its maximum over time (ExternalMax), and over time in the Timeline.
//   - Inactive split bytes: the free bytes of segments that also hold an
//     active block (allocated or pending free). A free block beside a live
//     one cannot be returned to the driver and serves only requests that
//     fit; PyTorch counts the same (inactive_split_bytes) except in
//     expandable segments, so Stats["inactive_split_bytes.all.*"] leaves
//     expandable ranges out while the InactiveSplit series includes them.
//
// GMLake's measure (ASPLOS'24) is 1 − peak active / peak reserved: the
// share of the peak reservation never active at once. The two peaks may be
// at different moments.
//
// The largest free block is the largest gap between active blocks within
// one segment (or contiguous mapped range of an expandable segment); blocks
// never span segments. It is computed when it matters, by sorting the live
// blocks (bounded work, rare events):
//
//   - for each OOM, with the cache's free bytes (reserved − allocated) at
//     that moment, showing whether the failure was fragmentation (much
//     free, no block large enough) or exhaustion;
//   - for the largest request that grew the pool: an alloc directly
//     preceded by its segment_alloc or segment_map events (spec §13 emits
//     them in that order). The new memory counts as occupied, so the gap
//     is what the request found before the grow.
//
// Both are also reported for segments of the request's stream alone, since
// a block is only reused on its own stream.
//
// # Sites at the peak
//
// Summary.Sites are the allocation sites (stacks) of the blocks allocated at
// the allocated peak, with their block and requested bytes and counts,
// largest first. Blocks allocated without a stack are one site
// (trace.NoStack); blocks live before the recording began (the reconstructed
// start of a wrapped history, whose stacks PyTorch lost) are another
// (BeforeRecording), so that memory nobody can attribute is not mistaken for
// memory allocated without Python frames. The Summarizer keeps per-stack
// live sums updated per event and copies them lazily: a new maximum of
// allocated bytes marks the copy stale, and the first decrease after it (or
// the end of the trace) takes it, copying only the stacks changed since the
// previous copy. The work is bounded by the number of events even when the
// peak creeps up every iteration. The segment layout at the reserved peak
// (Summary.Segments) is copied the same way, at the fullest moment of the
// reserved plateau; each copy walks the segments, which are few.
//
// # Phases
//
// A trace may carry the program's record_function scopes (trace.Annotation:
// torch.profiler.record_function("forward"), PyTorch's own
// Optimizer.step#Adam.step, ...). With Options.Annotations the Summarizer
// gives each event a phase: the innermost scope open on its device at its
// time (entered at or before it, left after it), OutsidePhases when none is
// open, BeforeRecordingPhase for the reconstructed start of a wrapped
// history. Names differing only by a trailing "#<digits>" are one phase
// (ProfilerStep#3). Per phase, Summary.Phases gives the scopes entered, the
// events, the time it was innermost, the allocations and their bytes, the
// most allocated and reserved bytes after its events, and the bytes it
// allocated that were live at the allocated peak: those sum to the peak, so
// they say which phase's memory the peak is made of, while the phase of the
// peak itself (Summary.AllocatedPeakPhase) says when it came. The annotations
// are walked with the events, one compare per event; a device without any
// costs one nil check. Timeline.Phases keeps the runs of events of each phase
// for plots, at most 4096 (neighbours merge past that).
//
// # Timeline
//
// The Timeline keeps at most Options.TimelineBuckets buckets (default 4096)
// of equal width in events. Each bucket keeps, per series, the minimum and
// maximum with the event and time at which they happened, and the last
// value. When the buckets are full, neighbours merge and the width doubles,
// so no peak is ever lost and memory is fixed. X is seconds since the first
// timed event, or the event index when events carry no time.
//
// # Lifetimes
//
// A lifetime runs from alloc to free_requested (when the caller let go), in
// microseconds when events carry time, else in events. Quantiles come from
// a log-linear histogram (exact below 64, then 1/32 relative width); the
// maximum is exact. Blocks reconstructed at trace start have no known
// start and are counted apart, as are blocks live at the end.
//
// # Counters
//
// Summary.Stats uses torch.cuda.memory_stats() names:
// allocated_bytes, reserved_bytes, active_bytes and requested_bytes
// .all.{current,peak}; segment.all.{current,peak} (segment_alloc and
// segment_free; maps do not count, as in PyTorch); allocation.all.{current,
// peak,allocated,freed}; inactive_split_bytes.all.{current,peak};
// num_device_alloc (segment_alloc + segment_map events), num_device_free
// (segment_free + segment_unmap events) and num_ooms. Pool splits (small,
// large) and counts that need the allocator's decisions (num_alloc_retries,
// oversize_*) are not derivable from events and are absent.
package analysis
