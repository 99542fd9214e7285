package allocator

import (
	"slices"
	"testing"
)

// fuzzFamilies are the setting families FuzzAllocator drives: every behaviour
// switch of the model (§3.2, §5–§10, §14), a non-default quantum, and the
// extreme values ParseConf accepts.
var fuzzFamilies = []struct {
	conf  string
	limit int64
	round int64
}{
	{conf: ""},
	{conf: "roundup_power2_divisions:[1:2,4:4,64:8,>:16]"},
	{conf: "max_split_size_mb:32", limit: 600 * mib},
	{conf: "expandable_segments:True"},
	{conf: "expandable_segments:True,max_split_size_mb:40", limit: 500 * mib},
	{conf: "garbage_collection_threshold:0.5", limit: 400 * mib},
	{conf: "large_segment_size_mb:32"},
	{conf: "", round: 4096, limit: 700 * mib},
	{conf: "roundup_power2_divisions:4,max_non_split_rounding_mb:64,max_split_size_mb:24"},
	// Values at the edges of what the parser accepts: segments and pages
	// larger than the device (every large-pool segment or page fails as out
	// of memory), sizes clamped to SIZE_MAX/MiB, an odd segment size,
	// divisions whose product with the quantum wraps in size_t, tiny
	// thresholds and the limit of a memory fraction.
	{conf: "large_segment_size_mb:21"},
	{conf: "large_segment_size_mb:100000"},
	{conf: "large_segment_size_mb:18446744073709551615"},
	{conf: "expandable_segments:True,large_segment_size_mb:2048"},
	{conf: "expandable_segments:True,large_segment_size_mb:8796093022206"},
	{conf: "max_split_size_mb:-1,max_non_split_rounding_mb:18446744073709551615"},
	{conf: "roundup_power2_divisions:[1:9223372036854775808,>:0]"},
	{conf: "roundup_power2_divisions:18014398509481984"},
	{conf: "garbage_collection_threshold:1e-300", limit: 300 * mib},
	{conf: "expandable_segments:True,per_process_memory_fraction:0.3,garbage_collection_threshold:0.99"},
	// The fraction alone, and the keys the model accepts without effect.
	{conf: "per_process_memory_fraction:0.5,garbage_collection_threshold:0.7,backend:native,release_lock_on_cudamalloc:True," +
		"pinned_use_cuda_host_register:True,pinned_num_register_threads:128,pinned_use_background_threads:True," +
		"pinned_reserve_segment_size_mb:18446744073709551615,graph_capture_record_stream_reuse:True"},
}

// fuzzPool is the private pool of the captures runOps makes.
var fuzzPool = PoolID{A: 1, B: 1}

// runOps interprets data as allocator operations (4 bytes each) under the
// family chosen by data[0], checking every invariant after each step.
func runOps(t *testing.T, data []byte) {
	if len(data) < 1 {
		return
	}
	fam := fuzzFamilies[int(data[0])%len(fuzzFamilies)]
	conf, err := ParseConf(fam.conf)
	if err != nil {
		t.Fatal(err)
	}
	if fam.round != 0 {
		conf.MinBlockSize = fam.round
	}
	dev := NewSimDevice(1 * gib)
	dev.ContextOverhead = 100 * mib
	a, err := New(conf, dev)
	if err != nil {
		t.Fatal(err)
	}
	a.SetMemoryLimit(fam.limit)
	// ha replays the same operations through the handle calls, which keep
	// no address index until a stale handle (a pending block a flush freed)
	// needs the lookup by address: it must emit the same events and end in
	// the same state.
	hdev := NewSimDevice(1 * gib)
	hdev.ContextOverhead = 100 * mib
	ha, err := New(conf, hdev)
	if err != nil {
		t.Fatal(err)
	}
	ha.SetMemoryLimit(fam.limit)
	// a reports its events to an Observer, ha to an EventSink (in runs of
	// 1 to 7 events): the two must see the same events.
	var evA []Event
	a.SetObserver(ObserverFunc(func(e *Event) { evA = append(evA, *e) }))
	sink := newRunSink(t, 0)
	sink.pending = ha.PendingEvents
	ha.SetEventSink(sink, sink.buf)
	var live, pending []uint64
	capturing := false
	var liveH, pendingH []Handle
	data = data[1:]
	// Bounded: CheckInvariants is linear in the blocks, so long inputs would
	// make each execution quadratic.
	for step := 0; len(data) >= 4 && step < 3000; step++ {
		op, b1, n := data[0]%8, data[1], int(data[2])<<8|int(data[3])
		data = data[4:]
		desc := ""
		switch {
		case op <= 2:
			var size int64
			switch b1 % 4 {
			case 0:
				size = int64(n) + 1
			case 1:
				size = int64(n)*16 + 1
			case 2:
				size = int64(n) * 256
			case 3:
				size = int64(n) * 2048
			}
			stream := uint64(b1>>6%3) << 8
			desc = "malloc"
			addr, err := a.Malloc(size, stream)
			if err != nil && !IsOOM(err) {
				t.Fatalf("step %d malloc(%d): %v", step, size, err)
			}
			haddr, h, herr := ha.MallocHandle(size, stream)
			if haddr != addr || (herr == nil) != (err == nil) {
				t.Fatalf("step %d malloc(%d): %#x %v, by handle %#x %v", step, size, addr, err, haddr, herr)
			}
			if err == nil && size > 0 {
				live = append(live, addr)
				liveH = append(liveH, h)
			}
		case op <= 4 || (op == 7 && b1%4 != 0):
			if len(live) == 0 {
				continue
			}
			i := n % len(live)
			desc = "free"
			if err := a.Free(live[i]); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if err := ha.FreeHandle(live[i], liveH[i]); err != nil {
				t.Fatalf("step %d: by handle: %v", step, err)
			}
			live = append(live[:i], live[i+1:]...)
			liveH = append(liveH[:i], liveH[i+1:]...)
		case op == 5:
			if len(live) == 0 {
				continue
			}
			i := n % len(live)
			desc = "record_stream+free"
			if err := a.RecordStream(live[i], uint64(b1)<<8+1); err != nil {
				t.Fatal(err)
			}
			if err := a.Free(live[i]); err != nil {
				t.Fatal(err)
			}
			if err := ha.RecordStreamHandle(live[i], liveH[i], uint64(b1)<<8+1); err != nil {
				t.Fatal(err)
			}
			if err := ha.FreeHandle(live[i], liveH[i]); err != nil {
				t.Fatal(err)
			}
			if a.Pending(live[i]) != ha.PendingHandle(live[i], liveH[i]) {
				t.Fatalf("step %d: pending by address and by handle differ", step)
			}
			if a.Pending(live[i]) {
				pending = append(pending, live[i])
				pendingH = append(pendingH, liveH[i])
			}
			live = append(live[:i], live[i+1:]...)
			liveH = append(liveH[:i], liveH[i+1:]...)
		case op == 6:
			pending, pendingH = prunePending(a, ha, pending, pendingH)
			if len(pending) == 0 {
				continue
			}
			i := n % len(pending)
			desc = "complete"
			switch b1 % 3 {
			case 0:
				if err := a.CompleteFree(pending[i]); err != nil {
					t.Fatal(err)
				}
				if err := ha.CompleteFreeHandle(pending[i], pendingH[i]); err != nil {
					t.Fatal(err)
				}
			case 1: // within the next malloc, after its search
				if err := a.CompleteLate(pending[i], 0); err != nil {
					t.Fatal(err)
				}
				if err := ha.CompleteLate(pending[i], pendingH[i]); err != nil {
					t.Fatal(err)
				}
			default:
				a.MarkEventsDone(pending[i])
				// MarkEventsDone by handle, as the other handle calls do it:
				// a stale handle falls back to the address.
				if id := ha.activeAt(pending[i], pendingH[i]); id != 0 {
					ha.markDone(id)
				} else {
					ha.MarkEventsDone(pending[i])
				}
			}
			pending = append(pending[:i], pending[i+1:]...)
			pendingH = append(pendingH[:i], pendingH[i+1:]...)
		case n%4 == 1:
			// A CUDA-graph capture into a private pool, begun or ended (and
			// the pool released: its segments go at the next empty_cache).
			if capturing {
				desc = "end capture"
				for _, x := range []*Allocator{a, ha} {
					x.EndAllocateToPool(fuzzPool)
					x.ReleasePool(fuzzPool)
					if n%8 == 5 { // and the pool's own empty_cache, as a MemPool's end runs it
						desc = "end capture, empty the pool"
						if err := x.EmptyPoolCache(fuzzPool); err != nil {
							t.Fatal(err)
						}
					}
				}
			} else {
				desc = "begin capture"
				for _, x := range []*Allocator{a, ha} {
					x.BeginAllocateToPool(fuzzPool, func(stream uint64) bool { return stream == 0 })
				}
			}
			capturing = !capturing
		default:
			desc = "empty_cache"
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if err := ha.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			pending, pendingH = pending[:0], pendingH[:0]
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatalf("after step %d (%s) under %q: %v", step, desc, fam.conf, err)
		}
		if err := ha.CheckInvariants(); err != nil {
			t.Fatalf("by handle, after step %d (%s) under %q: %v", step, desc, fam.conf, err)
		}
		ha.FlushEvents()
		evH := sink.events
		if !slices.Equal(evA, evH) || a.Stats() != ha.Stats() {
			t.Fatalf("step %d (%s) under %q: by address and by handle differ:\n%v\n%v", step, desc, fam.conf, evA, evH)
		}
		evA, sink.events = evA[:0], sink.events[:0]
	}
	if capturing { // a capture defers cross-stream frees (§8, §15): end it first
		a.EndAllocateToPool(fuzzPool)
		a.ReleasePool(fuzzPool)
	}
	for _, addr := range live {
		if err := a.Free(addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatalf("after final flush: %v", err)
	}
	st := a.Stats()
	if st.AllocatedBytes[0].Current != 0 || st.ActiveBytes[0].Current != 0 {
		t.Fatalf("memory left after freeing everything: allocated %+v, active %+v (capturing %v, pending %d)", st.AllocatedBytes[0], st.ActiveBytes[0], capturing, len(pending))
	}
	if !conf.ExpandableSegments && st.ReservedBytes[0].Current != 0 {
		t.Fatalf("reserved %d after freeing everything and flushing", st.ReservedBytes[0].Current)
	}
}

// prunePending drops blocks a flush or process_events has already freed,
// checking that the handle calls say the same.
func prunePending(a, ha *Allocator, p []uint64, ph []Handle) ([]uint64, []Handle) {
	out, outH := p[:0], ph[:0]
	for i, addr := range p {
		if a.Pending(addr) != ha.PendingHandle(addr, ph[i]) {
			panic("pending by address and by handle differ")
		}
		if a.Pending(addr) {
			out, outH = append(out, addr), append(outH, ph[i])
		}
	}
	return out, outH
}

// FuzzAllocator drives random alloc / free / cross-stream free / completion /
// empty_cache sequences under every setting family, with memory limits, and
// checks CheckInvariants after each step. Its seed corpus is in
// testdata/fuzz/FuzzAllocator.
func FuzzAllocator(f *testing.F) {
	for fam := range fuzzFamilies {
		seed := []byte{byte(fam)}
		x := uint32(fam*7919 + 1)
		for i := 0; i < 400; i++ {
			x = x*1664525 + 1013904223
			seed = append(seed, byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
		}
		f.Add(seed)
	}
	f.Fuzz(runOps)
}
