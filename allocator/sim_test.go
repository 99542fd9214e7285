package allocator

import "testing"

// A SimDevice never hands out one address twice, even when the addresses a
// replay plans come from a recording made on a SimDevice, which invents
// them in the same region (FuzzAnnotate found a replay whose invented
// segment took a recorded address, and the allocator's cudaFree of it
// failed).
func TestSimDevicePlansFromASim(t *testing.T) {
	rec := NewSimDevice(1 << 40)
	a, _ := rec.Malloc(20 << 20) // what a recording on a SimDevice gets

	d := NewSimDevice(1 << 40)
	d.PlanMalloc(a, 20<<20)
	got, err := d.Malloc(20 << 20)
	if err != nil || got != a {
		t.Fatalf("planned Malloc = %#x, %v; want %#x", got, err, a)
	}
	inv, err := d.Malloc(80 << 20) // unplanned: invented
	if err != nil {
		t.Fatal(err)
	}
	if inv < inventHigh {
		t.Errorf("invented %#x among the recording's addresses (from %#x); want %#x and up", inv, uint64(inventBase), uint64(inventHigh))
	}
	// A plan naming an address the device holds is not honoured.
	d.PlanMalloc(a, 2<<20)
	again, err := d.Malloc(2 << 20)
	if err != nil || again == a {
		t.Errorf("Malloc planned at the held %#x = %#x, %v; want another address", a, again, err)
	}
	for _, x := range []uint64{a, inv, again} {
		if err := d.Free(x); err != nil {
			t.Errorf("Free(%#x): %v", x, err)
		}
	}
	// Plans below the invented region leave it where it is.
	e := NewSimDevice(1 << 40)
	e.PlanMalloc(0x7f0000000000, 2<<20)
	e.Malloc(2 << 20)
	if x, _ := e.Malloc(2 << 20); x != inventBase {
		t.Errorf("invented %#x after a plan below 2^47, want %#x", x, uint64(inventBase))
	}
}
