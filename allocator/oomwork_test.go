package allocator

import (
	"strings"
	"testing"
)

// TestWork_oomBrief: with BriefOOMs an OOM touches no private pool's free
// blocks. A device full of 4,000 CUDA graphs' pools, each with its cached
// 2 MiB segment, then 1,000 requests that all run out of memory: the full
// message walks all 4,000 free blocks at each of them (4M blocks), a brief
// one none. A replay past a smaller device than the recording's did this
// at every request, quadratic in the pools.
func TestWork_oomBrief(t *testing.T) {
	const pools, ooms = 4000, 1000
	for _, brief := range []bool{false, true} {
		a, err := New(DefaultConf(), NewSimDevice(pools*2*mib))
		if err != nil {
			t.Fatal(err)
		}
		a.BriefOOMs(brief)
		for i := range pools {
			id := PoolID{A: uint64(i + 1)}
			a.BeginAllocateToPool(id, nil)
			addr, err := a.Malloc(512, 0)
			if err != nil {
				t.Fatalf("pool %d: %v", i, err)
			}
			a.EndAllocateToPool(id)
			if err := a.Free(addr); err != nil {
				t.Fatal(err)
			}
		}
		oomWork = 0
		var last error
		for range ooms {
			if _, err = a.Malloc(512, 0); !IsOOM(err) {
				t.Fatalf("a request past the device: %v, want an OOM", err)
			}
			last = err
		}
		if !brief {
			if oomWork != pools*ooms {
				t.Fatalf("the full messages walked %d free blocks, want %d", oomWork, pools*ooms)
			}
			if !strings.Contains(last.Error(), "allocated in private pools") {
				t.Errorf("the full message names no private pools: %s", last)
			}
			continue
		}
		if oomWork != 0 {
			t.Errorf("%d OOMs with BriefOOMs walked %d private free blocks, want 0", ooms, oomWork)
		}
		if want := "CUDA out of memory. Tried to allocate 2.00 MiB."; last.Error() != want {
			t.Errorf("brief message %q, want %q", last, want)
		}
	}
}
