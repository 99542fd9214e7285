package torchsnap

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tracer-dev/tracer/trace"
)

func (b *builder) str(v value) (string, error) {
	if v.k != vStr {
		return "", fmt.Errorf("is a %v, want str", v.k)
	}
	return b.strs[v.i], nil
}

func asInt(v value) (int64, error) {
	switch v.k {
	case vInt, vBool:
		return v.i, nil
	case vUint, vBig:
		return 0, errors.New("is an int out of the int64 range")
	}
	return 0, fmt.Errorf("is a %v, want int", v.k)
}

// asLine reads a frame's line number: any integer, one out of the range of
// a line (PyTorch's unsigned 2^64-1 above all) being trace.UnknownLine.
func asLine(v value) (int32, error) {
	switch v.k {
	case vInt, vBool:
		return trace.LineOf(v.i), nil
	case vUint, vBig:
		return trace.UnknownLine, nil
	}
	return 0, fmt.Errorf("is a %v, want int", v.k)
}

// asUint reads an address or stream handle: unsigned in meaning, but Python
// writes them as plain ints, so negative values wrap as the C++ side would.
func asUint(v value) (uint64, error) {
	switch v.k {
	case vInt, vBool, vUint:
		return uint64(v.i), nil
	case vBig:
		return 0, errors.New("is an int wider than 64 bits")
	}
	return 0, fmt.Errorf("is a %v, want int", v.k)
}

func asFloat(v value) (float64, error) {
	switch v.k {
	case vFloat:
		return math.Float64frombits(uint64(v.i)), nil
	case vInt, vBool:
		return float64(v.i), nil
	}
	return 0, fmt.Errorf("is a %v, want float", v.k)
}

func asBool(v value) (bool, error) {
	switch v.k {
	case vBool, vInt:
		return v.i != 0, nil
	}
	return false, fmt.Errorf("is a %v, want bool", v.k)
}

// stackOf converts a frames list to a stack id, once per list object.
func (b *builder) stackOf(v value) (trace.StackID, error) {
	if v.k == vNone {
		return trace.NoStack, nil
	}
	if v.k != vList && v.k != vTuple {
		return 0, fmt.Errorf("frames is a %v, want list", v.k)
	}
	if st, ok := b.lists.compactStack(v.i); ok {
		return st, nil
	}
	l := b.lists.at(v.i)
	if l.stack != -2 {
		return trace.StackID(l.stack), nil
	}
	b.items(v)
	if len(l.vals) == 0 {
		l.stack = int32(trace.NoStack)
		return trace.NoStack, nil
	}
	// Every container settles its items as they are added, so a frame dict
	// has already become a vFrame here; converting lazily would let a cyclic
	// pickle recurse without end.
	ids := b.idBuf[:0]
	for i, f := range l.vals {
		if f.k != vFrame {
			return 0, fmt.Errorf("frames[%d] is a %v, want a frame dict", i, f.k)
		}
		ids = append(ids, int32(f.i))
	}
	b.idBuf = ids
	id := b.internStack(ids)
	l.stack = int32(id)
	if deriveFrames {
		b.listItems -= int64(len(l.vals))
		// Its items are the stack's frames: dropped, and derived again
		// (underive) if the pickle uses the list as a value again, as a
		// compact list's are. A frames list too long for the flat paths
		// (over 1,000 frames) otherwise held 16 bytes a frame, for every
		// trace entry, until the end of decoding.
		l.vals, l.derived = nil, true
	}
	return id, nil
}

// internStack returns the id of the stack of frames ids (not empty).
func (b *builder) internStack(ids []int32) trace.StackID {
	key := b.keyBuf[:0]
	for _, f := range ids {
		key = append(key, byte(f), byte(f>>8), byte(f>>16), byte(f>>24))
	}
	b.keyBuf = key
	// The stack made last first, as internBytes does: consecutive entries
	// of a real snapshot often come from the same line.
	if b.lastStack >= 0 && string(key) == string(b.lastStackKey) {
		return b.lastStack
	}
	id, ok := b.stackIdx[string(key)]
	if !ok {
		st := make(trace.Stack, len(ids))
		for i, f := range ids {
			st[i] = b.frames[f]
		}
		id = trace.StackID(len(b.stacks))
		b.stacks = append(b.stacks, st)
		b.stackIdx[string(key)] = id
	}
	b.lastStackKey = append(b.lastStackKey[:0], key...)
	b.lastStack = id
	return id
}

type fieldErr struct {
	what, key string
	err       error
}

func (e *fieldErr) Error() string { return fmt.Sprintf("%s: %s %v", e.what, e.key, e.err) }

func (b *builder) keyName(k value) string {
	if k.k == vStr {
		return b.strs[k.i]
	}
	return k.k.String()
}

func (b *builder) toFrame(p []value) (value, error) {
	var f trace.Frame
	for j := 0; j+1 < len(p); j += 2 {
		k := p[j]
		if k.k != vStr {
			continue
		}
		var err error
		switch k.i {
		case kFilename:
			f.File, err = b.str(p[j+1])
		case kName:
			f.Name, err = b.str(p[j+1])
		case kLine:
			f.Line, err = asLine(p[j+1])
		}
		if err != nil {
			return value{}, &fieldErr{"frame", b.keyName(k), err}
		}
	}
	id, ok := b.frameIdx[f]
	if !ok {
		id = int32(len(b.frames))
		b.frames = append(b.frames, f)
		b.frameIdx[f] = id
	}
	return value{vFrame, int64(id)}, nil
}

func (b *builder) toEvent(p []value) (value, error) {
	ev := cev{Stack: trace.NoStack}
	hasAddr := false
	for j := 0; j+1 < len(p); j += 2 {
		k, v := p[j], p[j+1]
		if k.k != vStr || k.i >= numKeys {
			continue
		}
		hasAddr = hasAddr || k.i == kAddr
		var err error
		switch k.i {
		case kAction:
			if v.k != vStr {
				_, err = b.str(v)
				break
			}
			var ok bool
			if ev.Kind, ok = b.kindOf(v.i); !ok {
				return value{vSkipped, v.i}, nil
			}
		case kAddr:
			if ev.Kind != trace.KindOOM { // device_free wins for oom whatever the key order
				ev.Addr, err = asUint(v)
			}
		case kDeviceFree:
			ev.Addr, err = asUint(v)
		case kSize:
			ev.Size, err = asInt(v)
		case kStream:
			ev.Stream, err = asUint(v)
		case kTimeUs:
			if v.k != vNone {
				ev.TimeUs, err = asInt(v)
			}
		case kFrames:
			ev.Stack, err = b.stackOf(v)
		case kPoolID:
			if v.k != vNone {
				var p trace.PoolID
				if p, err = b.poolID(v); err == nil && !p.IsDefault() {
					ev.Pool = p
				}
			}
		}
		if err != nil {
			return value{}, &fieldErr{"trace entry", b.keyName(k), err}
		}
	}
	if !hasAddr && needsAddr(ev.Kind) {
		return value{}, &fieldErr{"trace entry (" + ev.Kind.String() + ")", "addr", errors.New("is missing")}
	}
	if ev.Kind == trace.KindOOM {
		// device_free may come after addr in the dict: read it last.
		for j := 0; j+1 < len(p); j += 2 {
			if k := p[j]; k.k == vStr && k.i == kDeviceFree {
				ev.Addr, _ = asUint(p[j+1])
			}
		}
	}
	return value{vEvent, b.events.add(&ev)}, nil
}

// needsAddr reports whether a trace entry of kind k must have an addr:
// every kind but snapshot (addr 0) and oom (device_free instead). The fast
// paths leave an entry without one to toEvent, which reports it.
func needsAddr(k trace.Kind) bool {
	return k >= trace.KindAlloc && k <= trace.KindSegmentUnmap
}

// kindOf returns the trace.Kind that string id names, if any, through a
// cache indexed by string id (an action string is one of a handful).
func (b *builder) kindOf(id int64) (trace.Kind, bool) {
	if id >= int64(len(b.kinds)) {
		b.kinds = append(b.kinds, make([]int8, len(b.strs)-len(b.kinds))...)
	}
	switch k := b.kinds[id]; k {
	case 0:
		kind, ok := trace.ParseKind(b.strs[id])
		b.kinds[id] = -1
		if ok {
			b.kinds[id] = int8(kind)
		}
		return kind, ok
	case -1:
		return 0, false
	default:
		return trace.Kind(k), true
	}
}

// knownKind is kindOf for a string id whose kind is cached, cheap enough to
// inline into flatEvent (one call per trace entry); ok is false for any
// other, for kindOf to tell.
func (b *builder) knownKind(id int64) (trace.Kind, bool) {
	if uint64(id) < uint64(len(b.kinds)) && b.kinds[id] > 0 {
		return trace.Kind(b.kinds[id]), true
	}
	return 0, false
}

func (b *builder) poolID(v value) (trace.PoolID, error) {
	if v.k != vTuple && v.k != vList {
		return trace.PoolID{}, fmt.Errorf("is a %v, want a 2-tuple", v.k)
	}
	vals := b.items(v)
	if len(vals) != 2 {
		return trace.PoolID{}, fmt.Errorf("has %d elements, want 2", len(vals))
	}
	x, err := asUint(vals[0])
	if err != nil {
		return trace.PoolID{}, err
	}
	y, err := asUint(vals[1])
	return trace.PoolID{A: x, B: y}, err
}

func (b *builder) toBlock(p []value) (value, error) {
	bl := blockRec{Block: Block{Stack: trace.NoStack}}
	haveReq := false
	for j := 0; j+1 < len(p); j += 2 {
		k, v := p[j], p[j+1]
		if k.k != vStr || k.i >= numKeys {
			continue
		}
		var err error
		switch k.i {
		case kAddress:
			bl.Addr, err = asUint(v)
			bl.hasAddr = err == nil
		case kSize:
			bl.Size, err = asInt(v)
		case kRequestedSize:
			bl.RequestedSize, err = asInt(v)
			haveReq = true
		case kState:
			var s string
			if s, err = b.str(v); err == nil {
				bl.State, err = parseBlockState(s)
			}
		case kFrames:
			bl.Stack, err = b.stackOf(v)
		}
		if err != nil {
			return value{}, &fieldErr{"block", b.keyName(k), err}
		}
	}
	// Legacy (≈2.0): stack and request come from history[0].
	for j := 0; j+1 < len(p); j += 2 {
		if k := p[j]; k.k != vStr || k.i != kHistory {
			continue
		}
		h := p[j+1]
		if (h.k != vList && h.k != vTuple) || len(b.items(h)) == 0 {
			continue
		}
		first := b.items(h)[0]
		if first.k != vDict {
			continue
		}
		hd := &b.dicts[first.i]
		for m, hk := range hd.keys {
			var err error
			switch {
			case hk.k == vStr && hk.i == kRealSize && !haveReq:
				bl.RequestedSize, err = asInt(hd.vals[m])
			case hk.k == vStr && hk.i == kFrames && bl.Stack == trace.NoStack:
				bl.Stack, err = b.stackOf(hd.vals[m])
			}
			if err != nil {
				return value{}, &fieldErr{"block history", b.keyName(hk), err}
			}
		}
	}
	return value{vBlock, b.addBlock(bl)}, nil
}

func (b *builder) toSegment(p []value) (value, error) {
	s := segRec{Segment: Segment{Stack: trace.NoStack}}
	var blocks value
	for j := 0; j+1 < len(p); j += 2 {
		k, v := p[j], p[j+1]
		if k.k != vStr || k.i >= numKeys {
			continue
		}
		var err error
		switch k.i {
		case kDevice:
			var n int64
			if n, err = asInt(v); err == nil && (n < 0 || n > math.MaxInt32) {
				err = fmt.Errorf("%d is out of range", n)
			}
			s.device = int32(n)
		case kAddress:
			s.Addr, err = asUint(v)
		case kTotalSize:
			s.TotalSize, err = asInt(v)
		case kAllocatedSize:
			s.AllocatedSize, err = asInt(v)
		case kActiveSize:
			s.ActiveSize, err = asInt(v)
		case kRequestedSize:
			s.RequestedSize, err = asInt(v)
		case kStream:
			s.Stream, err = asUint(v)
		case kSegmentType:
			var t string
			t, err = b.str(v)
			s.Large = t == "large"
		case kSegmentPoolID:
			s.Pool, err = b.poolID(v)
		case kIsExpandable:
			s.Expandable, err = asBool(v)
		case kFrames:
			s.Stack, err = b.stackOf(v)
		case kBlocks:
			if v.k != vList && v.k != vTuple {
				err = fmt.Errorf("is a %v, want list", v.k)
			}
			blocks = v
		}
		if err != nil {
			return value{}, &fieldErr{"segment", b.keyName(k), err}
		}
	}
	if blocks.k == vList || blocks.k == vTuple {
		// Each block dict belongs to one segment: more blocks in segments
		// than block dicts decoded means a list or dict is shared, which
		// could expand a small file without bound.
		shared := errors.New("segment: blocks holds a block dict or list that another segment holds too (PyTorch never shares them)")
		nBlocks := b.nBlocks
		lo, n, run := b.blockRun(blocks)
		if b.segBlocks += n; b.segBlocks > b.blockBase+nBlocks {
			return value{}, shared
		}
		var ok bool
		if run {
			s.Blocks, ok = b.viewRun(lo, n, s.Addr)
		}
		if !ok {
			vals := b.items(blocks)
			if s.Blocks, ok = b.viewBlocks(vals, s.Addr); !ok {
				if err := b.copyBlocks(&s, vals, shared); err != nil {
					return value{}, err
				}
			}
		}
		if b.segBlocks == b.blockBase+nBlocks && nBlocks > 0 {
			b.dropBlocks() // every block converted so far is in a segment
		}
	}
	b.segments = append(b.segments, s)
	return value{vSegment, int64(len(b.segments) - 1)}, nil
}

// copyBlocks sets s.Blocks to a copy of the blocks vals names, each block
// without an address placed where the one before it ends.
func (b *builder) copyBlocks(s *segRec, vals []value, shared error) error {
	s.Blocks = make([]Block, len(vals))
	blockCopies.Add(int64(len(vals)))
	addr := s.Addr
	for i, bv := range vals {
		if bv.k != vBlock {
			return fmt.Errorf("segment: blocks[%d] is a %v, want a block dict", i, bv.k)
		}
		if bv.i < b.blockBase {
			return shared // a segment before this one took it
		}
		br := b.block(bv.i)
		if !br.hasAddr {
			br.Addr = addr // older files: addresses are implied by the sizes
		}
		s.Blocks[i] = br.Block
		addr = br.Addr + uint64(br.Size)
	}
	return nil
}

func parseBlockState(s string) (BlockState, error) {
	switch s {
	case "inactive":
		return Inactive, nil
	case "active_allocated":
		return ActiveAllocated, nil
	case "active_pending_free", "active_awaiting_free":
		return ActivePendingFree, nil
	}
	return 0, fmt.Errorf("%q is not a known block state", strings.ToValidUTF8(s, "?"))
}
