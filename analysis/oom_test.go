package analysis

import "testing"

// Four 512 KiB blocks fill a 2 MiB segment and two are freed: 1 MiB live,
// 1 MiB free beside them in two 512 KiB pieces, and a request fails.
// Whether that is the limit or fragmentation depends on what the process
// could still reserve.
func TestOOMVerdict(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deviceFree uint64
		limit      int64
		request    int64
		want       OOMCause
		capacity   Bytes
	}{
		// 300 MiB free on the device: the request would fit in a new
		// segment, so the failure is the cache's pieces.
		{"device free", 300 * MiB, 0, 1 * MiB, CauseFragmentation, 302 * MiB},
		// A 2.5 MiB limit leaves 0.5 MiB to reserve: 1 MiB live + 1 MiB
		// asked fit in 2.5 MiB, yet no piece is 1 MiB.
		{"limit leaves room", 300 * MiB, 2*MiB + 512*KiB, 1 * MiB, CauseFragmentation, 2*MiB + 512*KiB},
		// A 2 MiB limit: 1 MiB live + 1 MiB asked = 2 MiB fits exactly.
		{"limit exact", 300 * MiB, 2 * MiB, 1 * MiB, CauseFragmentation, 2 * MiB},
		// Nothing left on the device: 1 MiB live + 1.5 MiB asked do not
		// fit in the 2 MiB reserved.
		{"device full", 0, 0, 1*MiB + 512*KiB, CauseLimit, 2 * MiB},
		// Nor under a 2 MiB limit, whatever the device has free.
		{"limit", 300 * MiB, 2 * MiB, 1*MiB + 512*KiB, CauseLimit, 2 * MiB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := run(t, Options{MemoryLimit: tc.limit}, false,
				segAlloc(0x100000, 2*MiB),
				alloc(0x100000, 1, 512*KiB, 1),
				alloc(0x100000+512*KiB, 1, 512*KiB, 2),
				alloc(0x100000+1*MiB, 1, 512*KiB, 3),
				alloc(0x100000+1*MiB+512*KiB, 1, 512*KiB, 3),
				freeReq(0x100000+512*KiB), freeDone(0x100000+512*KiB),
				freeReq(0x100000+1*MiB+512*KiB), freeDone(0x100000+1*MiB+512*KiB),
				oom(tc.request, tc.deviceFree),
			)
			if len(sum.OOMs) != 1 {
				t.Fatalf("%d OOMs, want 1", len(sum.OOMs))
			}
			o := sum.OOMs[0]
			if o.Cause != tc.want || o.CapacityBytes != tc.capacity {
				t.Errorf("cause %q, capacity %s; want %q, %s", o.Cause, o.CapacityBytes, tc.want, tc.capacity)
			}
			if o.LiveBytes != 1*MiB || o.FreeBesideLiveBytes != 1*MiB || o.LargestFree != 512*KiB {
				t.Errorf("live %s, free beside live %s, largest free %s; want 1 MiB, 1 MiB, 512 KiB",
					o.LiveBytes, o.FreeBesideLiveBytes, o.LargestFree)
			}
			// Live at that moment: stacks 1 and 3, 512 KiB each (stack 3's
			// second block was freed), by stack id on the tie.
			if len(o.LiveSites) != 2 || o.LiveSites[0].Stack != 1 || o.LiveSites[1].Stack != 3 ||
				o.LiveSites[0].BlockBytes != 512*KiB || o.LiveSites[1].Count != 1 {
				t.Errorf("live sites %+v, want stacks 1 and 3 with one 512 KiB block each", o.LiveSites)
			}
			if o.AvoidedBy == nil {
				t.Error("avoided_by is null; want []")
			}
		})
	}
}

func TestCause(t *testing.T) {
	if c := Cause(10, 90, 95, 5); c != CauseFragmentation {
		t.Errorf("100 needed of 100: %q", c)
	}
	if c := Cause(11, 90, 95, 5); c != CauseLimit {
		t.Errorf("101 needed of 100: %q", c)
	}
}
