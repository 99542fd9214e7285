package analysis

// Finalize returns the Summary of the events seen. It takes the pending
// peak copies (a peak at the very end of the trace has had no decrease to
// trigger them); the Summarizer must not be used afterwards.
func (s *Summarizer) Finalize() *Summary {
	if s.sitesStale {
		s.sites.snapshot()
		if s.ph != nil {
			s.ph.snapshot()
		}
		s.sitesStale = false
	}
	if s.layoutStale {
		s.snapshotLayout()
	}
	tl := s.tl.finish(s.hasTime, s.t0)
	peak := func(x Series) Peak {
		if s.fragOnly {
			return s.maxAt[x]
		}
		if len(tl.Buckets) == 0 {
			return Peak{}
		}
		m := tl.Max(x)
		return Peak{Bytes: Bytes(m.Value), Event: m.Event, Seq: m.Seq, TimeUs: m.TimeUs}
	}
	sum := &Summary{
		Device:        s.opt.Device,
		Events:        s.n,
		SkippedEvents: s.skipped,
		Approximate:   s.approx,
		Unmatched:     s.unmatch,
		Peaks: Peaks{
			Allocated: s.peak[Allocated],
			Reserved:  s.peak[Reserved],
			Active:    peak(Active),
			Requested: peak(Requested),
		},
		Segments:   s.layoutSlice(),
		SegmentsAt: s.layoutAt,
		OOMs:       s.ooms,
		Timeline:   tl,
	}
	sum.Stats = map[string]int64{
		"allocated_bytes.all.current":      s.v[Allocated],
		"allocated_bytes.all.peak":         int64(s.peak[Allocated].Bytes),
		"reserved_bytes.all.current":       s.v[Reserved],
		"reserved_bytes.all.peak":          int64(s.peak[Reserved].Bytes),
		"active_bytes.all.current":         s.v[Active],
		"active_bytes.all.peak":            int64(sum.Peaks.Active.Bytes),
		"requested_bytes.all.current":      s.v[Requested],
		"requested_bytes.all.peak":         int64(sum.Peaks.Requested.Bytes),
		"segment.all.current":              s.nSegments,
		"segment.all.peak":                 s.peakSegments,
		"allocation.all.current":           s.nBlocks,
		"allocation.all.peak":              s.peakBlocks,
		"allocation.all.allocated":         s.nAllocs,
		"allocation.all.freed":             s.nFrees,
		"inactive_split_bytes.all.current": s.segs.splitFixed,
		"inactive_split_bytes.all.peak":    s.peakSplitFixed,
		"num_device_alloc":                 s.nDevAlloc,
		"num_device_free":                  s.nDevFree,
		"num_ooms":                         s.nOOMs,
	}
	f := &sum.Fragmentation
	f.InternalAtPeak = Bytes(s.internalAt)
	f.InternalMax = peak(Internal)
	f.ExternalMax = peak(External)
	f.InactiveSplitMax = peak(InactiveSplit)
	if r := int64(s.peak[Reserved].Bytes); r > 0 {
		f.ExternalAtReservedPeak = Bytes(r - max(s.plateauAlloc, 0))
		f.ExternalRatio = float64(f.ExternalAtReservedPeak) / float64(r)
		f.GMLake = 1 - float64(sum.Peaks.Active.Bytes)/float64(r)
	}
	sum.Phases = []Phase{}
	if s.ph != nil && s.hasTime {
		sum.Phases = s.ph.result()
		sum.AllocatedPeakPhase = s.ph.names[s.ph.peakAt[Allocated]]
		sum.ReservedPeakPhase = s.ph.names[s.ph.peakAt[Reserved]]
		sum.Timeline.Phases = s.ph.spans
	}
	sum.Sites, sum.Other = s.sites.top(s.opt.TopSites, s.opt.Stacks, s.opt.SiteFrames)
	if s.hasGrow {
		g := s.grow
		sum.Grow = &g
	}
	if s.hasTime {
		// Blocks freed before the first timestamp went to lifeEv and are
		// left out: events and µs do not mix.
		sum.Lifetimes = s.lifeUs.result("us")
	} else {
		sum.Lifetimes = s.lifeEv.result("events")
	}
	sum.Lifetimes.Reconstructed = s.nRecon
	s.live.each(func(b *block) {
		if !b.pending {
			sum.Lifetimes.LiveAtEnd++
			sum.Lifetimes.LiveAtEndBytes += Bytes(b.size)
		}
	})
	return sum
}
