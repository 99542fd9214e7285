package torchsnap

import (
	"bytes"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestSpanCache checks the frames lists' span cache (knownSpan): trace
// entries whose new frames lists repeat the same memo references get the
// stack the first one made, from the cache; and once a pickle stores
// another frame into a slot those references name (BINPUT of an index used
// before, which CPython never writes), the same bytes must mean the new
// frame. Every entry's stack is checked against the frames its list holds,
// decoded sequentially and with compact frames lists turned off.
func TestSpanCache(t *testing.T) {
	var buf bytes.Buffer
	p := newPickleWriter(&buf)
	frame := func(name string) int {
		idx := p.memo // the dict's MEMOIZE comes first
		p.dict(func() {
			p.str("name")
			p.str(name)
			p.str("filename")
			p.str("model.py")
			p.str("line")
			p.int(int64(len(name)))
		})
		return idx
	}
	type want struct{ names []string }
	var wants []want
	var f0, f1, f2 int
	entry := func(addr int64, refs []int, names []string) {
		p.dict(func() {
			p.str("action")
			p.str("alloc")
			p.str("addr")
			p.int(addr)
			p.str("size")
			p.int(512)
			p.str("stream")
			p.int(0)
			p.str("frames")
			p.op(opEmptyList)
			p.memoize()
			p.op(opMark)
			for _, r := range refs {
				p.get(r)
			}
			p.op(opAppends)
		})
		wants = append(wants, want{names})
	}
	p.dict(func() {
		p.str("segments")
		p.list(0, nil)
		p.str("device_traces")
		p.list(1, func(int) {
			p.op(opEmptyList)
			p.memoize()
			p.op(opMark)
			// The frames, memoized once as CPython writes shared objects,
			// inside a list that is then dropped: a dict's memo index is
			// the slot its MEMOIZE fills.
			p.op(opEmptyList)
			p.memoize()
			p.op(opMark)
			f0 = frame("f0")
			f1 = frame("f1")
			f2 = frame("f2")
			p.op(opAppends, opPop)
			for i := range 5 {
				entry(0x1000*int64(i+1), []int{f0, f1}, []string{"f0", "f1"})
			}
			entry(0x10000, []int{f1, f2}, []string{"f1", "f2"})
			entry(0x11000, []int{f0, f1}, []string{"f0", "f1"})
			// Slot f1 now holds f2's frame.
			p.get(f2)
			p.op(opBinPut, byte(f1), opPop)
			entry(0x12000, []int{f0, f1}, []string{"f0", "f2"})
			entry(0x13000, []int{f0, f1}, []string{"f0", "f2"})
			p.op(opAppends)
		})
	})
	p.op(opStop)
	if err := p.w.Flush(); err != nil {
		t.Fatal(err)
	}
	if f2 >= 256 {
		t.Fatalf("frame slot %d does not fit BINPUT", f2)
	}
	for _, derive := range []bool{true, false} {
		deriveFrames = derive
		s, err := Decode(bytes.NewReader(buf.Bytes()))
		deriveFrames = true
		if err != nil {
			t.Fatalf("derive %v: %v", derive, err)
		}
		evs := s.Devices[0].Events
		if len(evs) != len(wants) {
			t.Fatalf("derive %v: %d events, want %d", derive, len(evs), len(wants))
		}
		for i, ev := range evs {
			if ev.Stack == trace.NoStack {
				t.Fatalf("derive %v: event %d has no stack", derive, i)
			}
			st := s.Stacks[ev.Stack]
			var names []string
			for _, f := range st {
				names = append(names, f.Name)
			}
			if len(names) != len(wants[i].names) || names[0] != wants[i].names[0] || names[1] != wants[i].names[1] {
				t.Errorf("derive %v: event %d: frames %v, want %v", derive, i, names, wants[i].names)
			}
		}
	}
}
