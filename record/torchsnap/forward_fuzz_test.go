package torchsnap

import (
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// FuzzForward_matchesUndo: for any short history over a few block
// addresses and segment ranges, consistent or not, and any end state made
// of a few segments with blocks, Forward (followed a chunk at a time) and
// parallelStart derive the start state that undo derives backwards, and
// the same unseen free.
func FuzzForward_matchesUndo(f *testing.F) {
	f.Add([]byte{0x00, 0x10, 0x21, 0x32, 0x43}, []byte{0x01, 0x12})
	f.Add([]byte{0x05, 0x15, 0x26, 0x07, 0x38, 0x49, 0x0a}, []byte{0xff, 0x00, 0x33})
	f.Add([]byte{0x20, 0x20, 0x31, 0x31, 0x42, 0x53, 0x64, 0x75, 0x86, 0x97}, []byte{0x7f})
	f.Fuzz(func(t *testing.T, history, end []byte) {
		if len(history) > 512 || len(end) > 16 {
			return
		}
		d := &Device{Segments: fuzzEndState(end), Events: fuzzHistory(history)}
		var fw Forward
		for lo := 0; lo < len(d.Events); lo += 3 { // chunks smaller than the history
			fw.Add(d.Events[lo:min(len(d.Events), lo+3)])
		}
		if fw.invalid {
			return // undo decides (Covers)
		}
		sameAsUndo(t, d, &fw)
	})
}

const fuzzMB = 1 << 20

// fuzzHistory makes a history of one event a byte: the high nibble picks
// the kind, the low one the address (four block slots a MiB apart in each
// of two 8 MiB ranges, or a range's start) and, with the kind, the size.
func fuzzHistory(b []byte) []trace.Event {
	kinds := []trace.Kind{trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted, trace.KindAlloc,
		trace.KindFreeRequested, trace.KindFreeCompleted, trace.KindSegmentAlloc, trace.KindSegmentFree,
		trace.KindSegmentMap, trace.KindSegmentUnmap, trace.KindAlloc, trace.KindFreeCompleted,
		trace.KindFreeRequested, trace.KindSegmentAlloc, trace.KindSegmentUnmap, trace.KindSegmentMap}
	evs := make([]trace.Event, 0, len(b))
	for i, c := range b {
		k := kinds[c>>4]
		lo := uint64(c & 15)
		e := trace.Event{Seq: int64(i), Kind: k, Stream: uint64(lo & 1), Stack: trace.StackID(i % 5), Size: int64(1+lo%3) * fuzzMB / 2}
		switch k {
		case trace.KindSegmentAlloc, trace.KindSegmentFree:
			e.Addr, e.Size = 0x1000_0000+(lo&1)*8*fuzzMB, int64(2+lo%3*3)*fuzzMB
		case trace.KindSegmentMap, trace.KindSegmentUnmap:
			e.Addr, e.Size = 0x1000_0000+(lo&1)*8*fuzzMB+(lo>>1)*2*fuzzMB, 2*fuzzMB
		default:
			e.Addr = 0x1000_0000 + (lo&1)*8*fuzzMB + (lo>>1)*fuzzMB
		}
		evs = append(evs, e)
	}
	return evs
}

// fuzzEndState makes an end state of up to two segments over the
// history's ranges, a byte each: the low bits their size, the others
// which of their first blocks are live, pending or cached.
func fuzzEndState(b []byte) []Segment {
	var segs []Segment
	for i, c := range b[:min(len(b), 2)] {
		base := 0x1000_0000 + uint64(i)*8*fuzzMB
		total := int64(2+c%4) * fuzzMB
		s := Segment{Addr: base, TotalSize: total, Large: true, Expandable: c&0x80 != 0, Stream: uint64(i)}
		at := int64(0)
		for j := 0; at < total; j++ {
			size := int64(fuzzMB)
			if at+size > total || j == 3 {
				size = total - at
			}
			state := BlockState((c >> (2 + 2*min(j, 2))) & 3 % 3)
			s.Blocks = append(s.Blocks, Block{Addr: base + uint64(at), Size: size, RequestedSize: size, State: state, Stack: trace.StackID(j)})
			at += size
		}
		segs = append(segs, s)
	}
	return segs
}
