package allocator

import "testing"

// Garbage collection releases only large-pool segments, so a run of
// releases that frees a small-pool segment is a malloc's only when the
// malloc's new segment is refused outright; past the GC threshold but
// under the limit, it was an empty_cache() call.
func TestWouldReleaseSmall(t *testing.T) {
	conf, err := ParseConf("garbage_collection_threshold:0.5")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(conf, NewSimDevice(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	a.SetMemoryLimit(200 << 20)
	for range 6 { // 120 MiB reserved, past the 100 MiB threshold
		addr, err := a.Malloc(20<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Free(addr); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Malloc(20<<20, 0); err != nil { // keep the segment in use
			t.Fatal(err)
		}
	}
	const size = 30 << 20 // fits no cached block; 120 + 30 MiB is under the limit
	if !a.WouldRelease(size, 0, false) {
		t.Error("past the GC threshold, a malloc would release large segments; WouldRelease says not")
	}
	if a.WouldRelease(size, 0, true) {
		t.Error("under the limit, a malloc releases no small-pool segment; WouldRelease says it would")
	}
	a.SetMemoryLimit(140 << 20) // 120 + 30 MiB now exceeds it: the OOM path frees every cached segment
	if !a.WouldRelease(size, 0, true) {
		t.Error("over the limit, a malloc releases every cached segment; WouldRelease says not")
	}
}
