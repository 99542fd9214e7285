package torchsnap

import (
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestKnownSpanHint: spans that begin with the same 8 bytes share a hint
// (the length and slot of the last one walked); knownSpan still gives each
// its own stack, and misses a span of a hinted length whose bytes differ,
// whichever was walked last.
func TestKnownSpanHint(t *testing.T) {
	get := func(refs ...byte) []byte { // BINGET refs..., APPENDS, then padding
		var b []byte
		for _, r := range refs {
			b = append(b, opBinGet, r)
		}
		return append(b, opAppends, opStop, opStop, opStop, opStop, opStop)
	}
	a := get(1, 2, 3, 4, 5)       // 10 bytes of references
	b := get(1, 2, 3, 4, 6, 7)    // the same first 8 bytes, longer
	c := get(1, 2, 3, 4, 9)       // a's length, another last reference
	d := get(1, 2, 3, 4, 5, 8, 8) // a's bytes, then more
	u := &unpickler{b: newBuilder()}
	for st, s := range [][]byte{a, b, d} {
		if _, _, ok := u.knownSpan(s, 0); ok {
			t.Fatalf("span %d known before it was put", st)
		}
		u.spans.put(u.pendingSpan, trace.StackID(st+10))
	}
	want := []struct {
		buf []byte
		st  trace.StackID
		ok  bool
	}{{a, 10, true}, {b, 11, true}, {a, 10, true}, {c, 0, false}, {a, 10, true}, {d, 12, true}, {a, 10, true}, {c, 0, false}, {b, 11, true}, {c, 0, false}}
	for i, w := range want {
		st, end, ok := u.knownSpan(w.buf, 0)
		if ok != w.ok || ok && (st != w.st || end != len(w.buf)-5) {
			t.Errorf("lookup %d: stack %d, end %d, known %v; want %d, %d, %v", i, st, end, ok, w.st, len(w.buf)-5, w.ok)
		}
	}
}
