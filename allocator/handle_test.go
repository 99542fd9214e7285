package allocator

import (
	"math/rand/v2"
	"testing"
)

// TestHandleCallsKeepNoIndex: a caller that holds the handles of its
// blocks (record's workload executor) mallocs, records streams, frees,
// asks whether a free waits for events (FreeHandlePending) and completes
// those events (MarkEventsDoneHandle) without the allocator ever building
// its address index, and gets the answers, events and statistics that the
// same calls by address give; MallocSize and AllocatedSize give the sizes
// BlockSize gives, and AllocatedSize none once the block is freed. A
// third allocator, unobserved, frees by FreeAllocated, which gives the
// size too, and keeps the same statistics.
func TestHandleCallsKeepNoIndex(t *testing.T) {
	a, _ := New(DefaultConf(), NewSimDevice(1<<40))
	ha, _ := New(DefaultConf(), NewSimDevice(1<<40))
	sa, _ := New(DefaultConf(), NewSimDevice(1<<40))
	var evA, evH []Event
	a.SetObserver(ObserverFunc(func(e *Event) { evA = append(evA, *e) }))
	ha.SetObserver(ObserverFunc(func(e *Event) { evH = append(evH, *e) }))
	type buf struct {
		addr  uint64
		h, sh Handle // ha's, sa's
	}
	var live, pending []buf
	waited := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 20000 {
		switch op := rng.IntN(10); {
		case op < 5 || len(live) == 0:
			size := int64(512 << rng.IntN(14))
			addr, err := a.Malloc(size, 0)
			haddr, h, herr := ha.MallocHandle(size, 0)
			saddr, sh, serr := sa.MallocHandle(size, 0)
			if err != nil || herr != nil || serr != nil || addr != haddr || addr != saddr {
				t.Fatalf("step %d: malloc %#x %v, by handle %#x %v and %#x %v", step, addr, err, haddr, herr, saddr, serr)
			}
			if want, _ := a.BlockSize(addr); ha.MallocSize(h) != want {
				t.Fatalf("step %d: MallocSize %d, BlockSize %d", step, ha.MallocSize(h), want)
			}
			live = append(live, buf{addr, h, sh})
		case op < 9:
			i := rng.IntN(len(live))
			b := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			if op == 8 {
				if err := a.RecordStream(b.addr, 7); err != nil {
					t.Fatal(err)
				}
				if err := ha.RecordStreamHandle(b.addr, b.h, 7); err != nil {
					t.Fatal(err)
				}
				if err := sa.RecordStreamHandle(b.addr, b.sh, 7); err != nil {
					t.Fatal(err)
				}
			}
			want, _ := a.BlockSize(b.addr)
			if got, ok := ha.AllocatedSize(b.addr, b.h); !ok || got != want {
				t.Fatalf("step %d: AllocatedSize %d %v, BlockSize %d", step, got, ok, want)
			}
			if err := a.Free(b.addr); err != nil {
				t.Fatal(err)
			}
			if got, ok := sa.FreeAllocated(b.addr, b.sh); !ok || got != want {
				t.Fatalf("step %d: FreeAllocated %d %v, BlockSize %d", step, got, ok, want)
			}
			p, err := ha.FreeHandlePending(b.addr, b.h)
			if got, ok := ha.AllocatedSize(b.addr, b.h); ok {
				t.Fatalf("step %d: AllocatedSize %d of a freed block", step, got)
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != a.Pending(b.addr) {
				t.Fatalf("step %d: pending %v, by address %v", step, p, a.Pending(b.addr))
			}
			if p {
				pending = append(pending, b)
				waited++
			}
		default: // a sync: every pending block's events complete
			for _, b := range pending {
				a.MarkEventsDone(b.addr)
				ha.MarkEventsDoneHandle(b.addr, b.h)
				sa.MarkEventsDoneHandle(b.addr, b.sh)
			}
			pending = pending[:0]
		}
		if len(evA) != len(evH) || a.Stats() != ha.Stats() || a.Stats() != sa.Stats() {
			t.Fatalf("step %d: by address and by handle differ: %d and %d events", step, len(evA), len(evH))
		}
		for i := range evA {
			if evA[i] != evH[i] {
				t.Fatalf("step %d: event %d: %+v by address, %+v by handle", step, i, evA[i], evH[i])
			}
		}
		evA, evH = evA[:0], evH[:0]
	}
	if waited == 0 {
		t.Fatal("no free waited for events: the test tests nothing")
	}
	if ha.indexed {
		t.Error("the calls by handle built the address index")
	}
}
