package main

import (
	"fmt"
	"strings"
)

// snap writes a PyTorch snapshot in MemoryViz's JSON form (the schema of
// torch.cuda.memory._snapshot()): one device's history and its segments at
// the end.
type snap struct {
	trace strings.Builder
	segs  strings.Builder
	t     int64
	nev   int
	nseg  int
}

const snapBase = 0x7f0000000000

// event appends one history entry.
func (s *snap) event(action string, addr uint64, size int64) {
	if s.nev > 0 {
		s.trace.WriteString(",\n")
	}
	s.nev++
	s.t++
	fmt.Fprintf(&s.trace, `{"action": %q, "addr": %d, "size": %d, "stream": 0, "time_us": %d, "frames": [{"name": "step", "filename": "gen.py", "line": %d}]}`,
		action, addr, size, 1_700_000_000_000_000+s.t, 10+s.nev%7)
}

// block is one block of a segment at the end.
type block struct {
	addr   uint64
	size   int64
	active bool
}

// segment appends a segment of the end state.
func (s *snap) segment(addr uint64, size int64, pool [2]uint64, blocks []block) {
	if s.nseg > 0 {
		s.segs.WriteString(",\n")
	}
	s.nseg++
	var alloc int64
	var bs []string
	for _, b := range blocks {
		state := "inactive"
		if b.active {
			state, alloc = "active_allocated", alloc+b.size
		}
		bs = append(bs, fmt.Sprintf(`{"address": %d, "size": %d, "requested_size": %d, "state": %q, "frames": []}`,
			b.addr, b.size, b.size, state))
	}
	typ := "large"
	if size <= 2*mib && pool == [2]uint64{} {
		typ = "small"
	}
	fmt.Fprintf(&s.segs, `{"device": 0, "address": %d, "total_size": %d, "allocated_size": %d, "active_size": %d, "requested_size": %d, "stream": 0, "segment_type": %q, "segment_pool_id": [%d, %d], "is_expandable": false, "frames": [], "blocks": [%s]}`,
		addr, size, alloc, alloc, alloc, typ, pool[0], pool[1], strings.Join(bs, ", "))
}

func (s *snap) String() string {
	return `{"segments": [` + s.segs.String() + `], "device_traces": [[` + s.trace.String() +
		`]], "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0, "expandable_segments": false}, "external_annotations": []}` + "\n"
}

// privatePools: n 2 MiB segments of private pools (a CUDA graph's each),
// in shuffled address order, each with a block allocated and freed.
func privatePools(n int) string {
	var s snap
	for k := range n {
		i := uint64(k*7919) % uint64(n) // a permutation when n is not a multiple of 7919
		a := snapBase + i<<22
		s.event("segment_alloc", a, 2*mib)
		s.event("alloc", a, 512)
		s.event("free_requested", a, 512)
		s.event("free_completed", a, 512)
	}
	for i := range uint64(n) {
		a := snapBase + i<<22
		s.segment(a, 2*mib, [2]uint64{1, i + 1}, []block{{a, 2 * mib, false}})
	}
	return s.String()
}

// wrapped: a history that lost its start (the ring buffer wrapped): n
// segments it never saw allocated, each with a live 1 MiB block from
// before the history and a second one the history frees and allocates
// again (the only free block then: the model's choice too); then the
// second blocks freed.
func wrapped(n int) string {
	var s snap
	at := func(i int) uint64 { return snapBase + uint64(i)*2*mib }
	for i := range n {
		s.event("free_requested", at(i)+mib, mib)
		s.event("free_completed", at(i)+mib, mib)
		s.event("alloc", at(i)+mib, mib)
	}
	for i := range n {
		s.event("free_requested", at(i)+mib, mib)
		s.event("free_completed", at(i)+mib, mib)
	}
	for i := range n {
		s.segment(at(i), 2*mib, [2]uint64{}, []block{{at(i), mib, true}, {at(i) + mib, mib, false}})
	}
	return s.String()
}

// snapChurn: n 2 MiB segments allocated with a 512-byte block each, then
// n segments allocated, used and released below all of them, each the
// lowest by address. (At 8n the live segments take 64 GiB: past the
// replay's 80 GiB device the model would go out of memory.)
func snapChurn(n int) string {
	var s snap
	top := uint64(snapBase) + uint64(n)*2*mib
	for i := range n {
		a := top + uint64(i)*2*mib
		s.event("segment_alloc", a, 2*mib)
		s.event("alloc", a, 512)
	}
	for i := range n {
		a := top - uint64(i+1)*2*mib
		s.event("segment_alloc", a, 2*mib)
		s.event("alloc", a, 512)
		s.event("free_requested", a, 512)
		s.event("free_completed", a, 512)
		s.event("segment_free", a, 2*mib)
	}
	for i := range n {
		a := top + uint64(i)*2*mib
		s.segment(a, 2*mib, [2]uint64{}, []block{{a, 512, true}, {a + 512, 2*mib - 512, false}})
	}
	return s.String()
}

// snapCrossStream: n 512-byte blocks allocated (4,096 to a 2 MiB
// segment), all freed while another stream uses them (free_requested),
// then all completed at once (a synchronize): n frees pending together,
// which the import's annotation replays as recorded.
func snapCrossStream(n int) string {
	var s snap
	const per = 2 * mib / 512
	at := func(i int) uint64 { return snapBase + uint64(i/per)*2*mib + uint64(i%per)*512 }
	for i := range n {
		if i%per == 0 {
			s.event("segment_alloc", at(i), 2*mib)
		}
		s.event("alloc", at(i), 512)
	}
	for i := range n {
		s.event("free_requested", at(i), 512)
	}
	for i := range n {
		s.event("free_completed", at(i), 512)
	}
	for i := 0; i < n; i += per {
		s.segment(at(i), 2*mib, [2]uint64{}, []block{{at(i), 2 * mib, false}})
	}
	return s.String()
}
