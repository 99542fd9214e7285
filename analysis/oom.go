package analysis

import "github.com/tracer-dev/tracer/trace"

// OOMCause says why a request failed.
type OOMCause string

const (
	// CauseLimit: the live blocks and the request together exceed the
	// memory the process may hold (the per-process limit, or the device's
	// free memory with what the process already reserved). No allocator
	// setting avoids it, short of rounding requests up less.
	CauseLimit OOMCause = "limit"
	// CauseFragmentation: the live blocks and the request fit, but the
	// free memory is in pieces, none large enough: free blocks beside live
	// ones that the allocator cannot release, and too little left to
	// reserve a new segment. Other settings (expandable segments,
	// max_split_size_mb, garbage collection) may avoid it.
	CauseFragmentation OOMCause = "fragmentation"
)

// oomLiveSites is how many allocation sites an OOM lists as live.
const oomLiveSites = 5

// Cause classifies an OOM from the cache state at that moment: the
// rounded request, the live (allocated and pending-free) bytes, the
// reserved bytes, and the bytes the process could still reserve (the
// device's free memory, or what the per-process limit leaves).
func Cause(request, live, reserved, canReserve int64) OOMCause {
	if live+request > reserved+canReserve {
		return CauseLimit
	}
	return CauseFragmentation
}

// oomVerdict fills the verdict of o, an OOM at the summarizer's current
// state: why it failed, the free space beside live blocks, and the
// allocation sites live at that moment.
func (s *Summarizer) oomVerdict(o *OOM) {
	canReserve := int64(o.DeviceFree)
	if l := s.opt.MemoryLimit; l > 0 {
		canReserve = min(canReserve, max(l-s.v[Reserved], 0))
	}
	o.CapacityBytes = Bytes(s.v[Reserved] + canReserve)
	o.LiveBytes = Bytes(s.v[Active])
	o.Cause = Cause(int64(o.Request), s.v[Active], s.v[Reserved], canReserve)
	o.FreeBesideLiveBytes = Bytes(s.segs.split)
	o.LiveSites, _ = s.sites.topOf(s.sites.cur, oomLiveSites, s.opt.Stacks, s.opt.SiteFrames)
	if o.LiveSites == nil {
		o.LiveSites = []Site{}
	}
	o.AvoidedBy = []string{}
}

// OOMSite names the allocation site of the failed request in one line.
func OOMSite(o *OOM, stacks func(trace.StackID) trace.Stack) string {
	if stacks == nil || o.Stack < 0 {
		return ""
	}
	st := stacks(o.Stack)
	if len(st) == 0 {
		return ""
	}
	s := Site{Stack: o.Stack, Frames: st[:min(len(st), 1)], Caller: userFrame(st)}
	return s.Label()
}
