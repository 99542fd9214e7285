package allocator

import (
	"errors"
	"testing"
)

// TestExpandablePageLargerThanDevice: with large_segment_size_mb beyond the
// device, an expandable segment reserves one page (numSegments rounds up)
// and mapping it fails as cuMemCreate does, out of memory: a large request
// is an OOM, a small one is served by the small pool's 2 MiB pages. The
// model used to reserve no page at all and dereference a nil segment.
func TestExpandablePageLargerThanDevice(t *testing.T) {
	for _, lseg := range []string{"100000", "8796093022206"} {
		conf, err := ParseConf("expandable_segments:True,large_segment_size_mb:" + lseg)
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(conf, NewSimDevice(80*gib))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Malloc(16*mib, 0); !errors.Is(err, ErrOOM) {
			t.Errorf("large_segment_size_mb:%s: Malloc(16 MiB) = %v, want an OOM", lseg, err)
		}
		if _, err := a.Malloc(4096, 0); err != nil {
			t.Errorf("large_segment_size_mb:%s: Malloc(4 KiB): %v", lseg, err)
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExpandableReservation: the reservation is ⌈1.125 × total / page⌉
// pages, rounded up as ExpandableSegment's numSegments does: on an H100 of
// 85,017,493,504 bytes, 4,561 pages of 20 MiB (4,560.7 rounded up).
func TestExpandableReservation(t *testing.T) {
	conf, err := ParseConf("expandable_segments:True")
	if err != nil {
		t.Fatal(err)
	}
	dev := NewSimDevice(85017493504)
	a, err := New(conf, dev)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := a.Malloc(16*mib, 0)
	if err != nil {
		t.Fatal(err)
	}
	const page = 20 * mib
	if !dev.Reserved(addr+4560*page) || dev.Reserved(addr+4561*page) {
		t.Errorf("reservation at %#x is not 4,561 pages of 20 MiB", addr)
	}
}
