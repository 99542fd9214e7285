package analysis

import "github.com/tracer-dev/tracer/trace"

// Summary is what a Summarizer computed over a trace. It holds plain data
// (bytes as integers in JSON) for text, JSON and plots.
type Summary struct {
	Device        int32 `json:"device"`
	Events        int64 `json:"events"`         // events of Device analysed
	SkippedEvents int64 `json:"skipped_events"` // events of other devices
	// Approximate is true when some alloc or free lacked BlockSize (a
	// PyTorch trace) and its block size was estimated by rounding the
	// request up to 512 bytes; block-byte figures are then lower bounds.
	Approximate bool `json:"approximate"`
	// Unmatched counts events that did not fit the state: frees of unknown
	// blocks, double frees, segment frees of unknown segments. A truncated
	// trace without reconstructed events has some.
	Unmatched int64 `json:"unmatched"`

	// Stats are the torch.cuda.memory_stats() keys computable from events
	// (see the package doc), at the end of the trace.
	Stats map[string]int64 `json:"stats"`

	Peaks         Peaks         `json:"peaks"`
	Fragmentation Fragmentation `json:"fragmentation"`

	// Sites are the allocation sites live at the allocated peak, largest
	// block bytes first, at most Options.TopSites; Other sums the rest.
	Sites []Site `json:"sites"`
	Other Site   `json:"other"`

	// Phases attribute the run to the program's record_function scopes
	// (see Phase); empty when the trace recorded none for Device.
	// AllocatedPeakPhase and ReservedPeakPhase name the phase of each peak.
	Phases             []Phase `json:"phases"`
	AllocatedPeakPhase string  `json:"allocated_peak_phase,omitempty"`
	ReservedPeakPhase  string  `json:"reserved_peak_phase,omitempty"`

	// Segments is the segment layout when the reserved peak was fullest (see
	// the package doc), sorted by address; SegmentsAt says when.
	Segments   []SegmentLayout `json:"segments"`
	SegmentsAt Peak            `json:"segments_at"`

	Lifetimes Lifetimes `json:"lifetimes"`

	// OOMs are the first Options.MaxOOMs out-of-memory events; the count of
	// all is Stats["num_ooms"].
	OOMs []OOM `json:"ooms"`
	// Grow is the largest request that had to grow the pool, nil if none.
	Grow *Grow `json:"grow,omitempty"`
	// MemoryLimit is the per-process limit the run was under, 0 for none
	// or unknown: set by the caller, who knows the settings (a report
	// then tells an OOM's room under the limit rather than device free).
	MemoryLimit Bytes `json:"memory_limit_bytes"`

	Timeline Timeline `json:"timeline"`
}

// Peak is the maximum of a quantity and the first event that reached it.
type Peak struct {
	Bytes  Bytes `json:"bytes"`
	Event  int64 `json:"event"` // index among the analysed events
	Seq    int64 `json:"seq"`   // the event's trace.Event.Seq
	TimeUs int64 `json:"time_us"`
}

// Peaks are the maxima of the byte series.
type Peaks struct {
	Allocated Peak `json:"allocated"`
	Reserved  Peak `json:"reserved"`
	Active    Peak `json:"active"`
	Requested Peak `json:"requested"`
}

// Fragmentation holds the measures defined in the package doc.
type Fragmentation struct {
	InternalAtPeak Bytes `json:"internal_at_peak"` // active − requested at the allocated peak
	InternalMax    Peak  `json:"internal_max"`

	ExternalAtReservedPeak Bytes   `json:"external_at_reserved_peak"` // reserved peak − most allocated during it
	ExternalRatio          float64 `json:"external_ratio"`            // ExternalAtReservedPeak / reserved peak
	ExternalMax            Peak    `json:"external_max"`              // max of reserved − allocated
	InactiveSplitMax       Peak    `json:"inactive_split_max"`

	// GMLake is 1 − peak active / peak reserved (GMLake, ASPLOS'24).
	GMLake float64 `json:"gmlake"`
}

// SegmentLayout is one segment (or contiguous mapped range of an
// expandable segment). Allocated + PendingFree + SplitFree + Free = Size.
type SegmentLayout struct {
	Addr        uint64 `json:"addr"`
	Size        Bytes  `json:"size"`
	Stream      uint64 `json:"stream"`
	Expandable  bool   `json:"expandable"`
	Blocks      int32  `json:"blocks"`       // active blocks inside
	Allocated   Bytes  `json:"allocated"`    // allocated blocks
	PendingFree Bytes  `json:"pending_free"` // freed, awaiting free_completed
	SplitFree   Bytes  `json:"split_free"`   // free, in a segment with active blocks
	Free        Bytes  `json:"free"`         // free, the segment holds no active block
}

// OOM is one out-of-memory event and the cache state at that moment.
type OOM struct {
	Event      int64         `json:"event"`
	Seq        int64         `json:"seq"`
	TimeUs     int64         `json:"time_us"`
	Request    Bytes         `json:"request"` // rounded request size
	Stream     uint64        `json:"stream"`
	Stack      trace.StackID `json:"stack"`
	DeviceFree Bytes         `json:"device_free"` // cudaMemGetInfo free
	Reserved   Bytes         `json:"reserved"`
	Allocated  Bytes         `json:"allocated"`
	CacheFree  Bytes         `json:"cache_free"` // reserved − allocated
	// LargestFree is the largest free gap in any segment; LargestFreeStream
	// only in segments of the request's stream (the only ones it can use).
	LargestFree       Bytes `json:"largest_free"`
	LargestFreeStream Bytes `json:"largest_free_stream"`

	// The verdict (oom.go). CapacityBytes is what the process could hold:
	// its reserved bytes and what it could still reserve (under the
	// per-process limit, Options.MemoryLimit, or the device's free
	// memory); LiveBytes its allocated and pending-free blocks.
	Cause               OOMCause `json:"cause"`
	CapacityBytes       Bytes    `json:"capacity_bytes"`
	LiveBytes           Bytes    `json:"live_bytes"`
	FreeBesideLiveBytes Bytes    `json:"free_beside_live_bytes"` // free blocks in segments that hold live ones
	// LiveSites are the allocation sites live at that moment, largest first.
	LiveSites []Site `json:"live_sites"`
	// AvoidedBy names settings (PYTORCH_CUDA_ALLOC_CONF strings, "" for
	// PyTorch's defaults) under which the request does not fail; a summary
	// cannot know them (tune fills them in), so [] here.
	AvoidedBy []string `json:"avoided_by"`
}

// Grow is a request that the cache could not serve, so the allocator
// reserved more memory (segment_alloc or segment_map right before the alloc).
type Grow struct {
	Event     int64         `json:"event"`
	Seq       int64         `json:"seq"`
	TimeUs    int64         `json:"time_us"`
	Requested Bytes         `json:"requested"`
	BlockSize Bytes         `json:"block_size"`
	Stream    uint64        `json:"stream"`
	Stack     trace.StackID `json:"stack"`
	NewBytes  Bytes         `json:"new_bytes"` // reserved by the grow
	// LargestFree and LargestFreeStream are the largest free gaps before
	// the grow, as in OOM.
	LargestFree       Bytes `json:"largest_free"`
	LargestFreeStream Bytes `json:"largest_free_stream"`
}
