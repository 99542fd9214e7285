package torchsnap

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tracer-dev/tracer/trace"
)

// Keys the builder looks up. They are interned first, so their string ids are
// these constants and a key test is an integer compare.
const (
	kAction = iota
	kAddr
	kSize
	kStream
	kTimeUs
	kFrames
	kDeviceFree
	kPoolID
	kFilename
	kLine
	kName
	kAddress
	kRequestedSize
	kState
	kHistory
	kRealSize
	kDevice
	kTotalSize
	kAllocatedSize
	kActiveSize
	kSegmentType
	kSegmentPoolID
	kIsExpandable
	kBlocks
	kSegments
	kDeviceTraces
	kAllocatorSettings
	kExternalAnnotations
	kStage
	numKeys
)

var keyNames = [numKeys]string{
	kAction: "action", kAddr: "addr", kSize: "size", kStream: "stream", kTimeUs: "time_us",
	kFrames: "frames", kDeviceFree: "device_free", kPoolID: "pool_id", kFilename: "filename",
	kLine: "line", kName: "name", kAddress: "address", kRequestedSize: "requested_size",
	kState: "state", kHistory: "history", kRealSize: "real_size", kDevice: "device",
	kTotalSize: "total_size", kAllocatedSize: "allocated_size", kActiveSize: "active_size",
	kSegmentType: "segment_type", kSegmentPoolID: "segment_pool_id", kIsExpandable: "is_expandable",
	kBlocks: "blocks", kSegments: "segments", kDeviceTraces: "device_traces",
	kAllocatorSettings: "allocator_settings", kExternalAnnotations: "external_annotations",
	kStage: "stage",
}

// segRec is a converted segment dict with the device it names.
type segRec struct {
	Segment
	device int32
}

// builder owns every table the values index, and converts schema dicts.
type builder struct {
	strs   []string
	strIdx map[string]int32

	lists     listStore
	dicts     []dictObj
	freeDicts []int32
	listItems int64 // items appended to lists (see unpickler.bounded)

	frames   []trace.Frame
	frameIdx map[trace.Frame]int32
	stacks   []trace.Stack
	stackIdx map[string]trace.StackID
	keyBuf   []byte
	idBuf    []int32
	// The string and the stack interned last (internBytes, internStack).
	lastStr      string
	lastStrID    int32
	lastStackKey []byte
	lastStack    trace.StackID
	pairBuf      []value // scratch: a dict's items interleaved, for convert
	kinds        []int8  // by string id: the trace.Kind it names; 0 unknown yet, -1 none

	events    eventStore
	blocks    []blockRec
	segBlocks int // blocks in the segments converted so far
	segments  []segRec

	memo memo
}

type blockRec struct {
	Block
	hasAddr bool
}

func newBuilder() *builder {
	b := &builder{
		strIdx:    make(map[string]int32, 256),
		frameIdx:  map[trace.Frame]int32{},
		stackIdx:  map[string]trace.StackID{},
		lastStrID: -1,
		lastStack: -1,
	}
	for _, k := range keyNames {
		b.internString(k)
	}
	return b
}

func (b *builder) internBytes(s []byte) value {
	// The string interned last first: a trace entry of a real snapshot
	// writes its compile_context ("N/A") anew each time, and hashing it for
	// the map cost more than comparing it.
	if b.lastStrID >= 0 && string(s) == b.lastStr {
		return value{vStr, int64(b.lastStrID)}
	}
	id, ok := b.strIdx[string(s)] // no allocation for the lookup
	if !ok {
		id = int32(b.internString(string(s)).i)
	}
	b.lastStr, b.lastStrID = b.strs[id], id
	return value{vStr, int64(id)}
}

func (b *builder) internString(s string) value {
	if id, ok := b.strIdx[s]; ok {
		return value{vStr, int64(id)}
	}
	id := int32(len(b.strs))
	b.strs = append(b.strs, s)
	b.strIdx[s] = id
	return value{vStr, int64(id)}
}

func (b *builder) newList(k vkind, vals []value) value {
	return value{k, b.lists.add(listObj{vals: vals, stack: -2})}
}

func (b *builder) newDict() value {
	if n := len(b.freeDicts); n > 0 {
		i := b.freeDicts[n-1]
		b.freeDicts = b.freeDicts[:n-1]
		return value{vDict, int64(i)}
	}
	b.dicts = append(b.dicts, dictObj{memo: -1})
	return value{vDict, int64(len(b.dicts) - 1)}
}

// dictMemo notes that memo slot idx refers to dict v.
func (b *builder) dictMemo(v value, idx uint64) {
	d := &b.dicts[v.i]
	if d.memo == -1 && idx <= math.MaxInt64 {
		d.memo = int64(idx)
	} else {
		d.memo = -2
	}
}

// shared marks a dict fetched from the memo while still generic: another
// reference to it now exists, so its slot must never be recycled.
func (b *builder) shared(v value) {
	if v.k == vDict {
		b.dicts[v.i].memo = -2
	}
}

func (b *builder) setItem(d value, k, v value) error {
	if d.k != vDict {
		return fmt.Errorf("SETITEM on a %v", d.k)
	}
	if v.k == vDict {
		var err error
		if v, err = b.settle(v); err != nil {
			return err
		}
	}
	o := &b.dicts[d.i]
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
	return nil
}

func (b *builder) appendItem(l value, v value) error {
	if l.k != vList {
		return fmt.Errorf("APPEND to a %v", l.k)
	}
	v, err := b.settle(v)
	if err != nil {
		return err
	}
	o := b.lists.at(l.i)
	if o.derived {
		b.underive(o)
	}
	if v.k == vEvent && len(o.vals) == 0 && (o.evN == 0 || v.i == o.evLo+o.evN) {
		if o.evN == 0 {
			o.evLo = v.i
		}
		o.evN++
		return nil
	}
	b.materialize(o)
	o.vals = append(o.vals, v)
	b.listItems++ // see unpickler.bounded
	return nil
}

// reserveList makes room for items about to be appended to an empty list,
// unless they are events (kept as a run, not as values).
func (b *builder) reserveList(l value, items []value) {
	if l.k != vList || len(items) == 0 || items[0].k == vEvent {
		return
	}
	if o := b.lists.at(l.i); len(o.vals) == 0 && o.evN == 0 && !o.derived {
		o.vals = make([]value, 0, len(items))
	}
}

// reserveDict makes room for n items about to be set in a dict.
func (b *builder) reserveDict(d value, n int) {
	if d.k != vDict {
		return
	}
	if o := &b.dicts[d.i]; cap(o.keys)-len(o.keys) < n {
		o.keys = slices.Grow(o.keys, n)
		o.vals = slices.Grow(o.vals, n)
	}
}

// materialize turns a run of events back into one value per event, for a
// list that turned out not to be a plain trace list.
func (b *builder) materialize(o *listObj) {
	for i := int64(0); i < o.evN; i++ {
		o.vals = append(o.vals, value{vEvent, o.evLo + i})
	}
	o.evN = 0
}

// items returns the elements of a list or tuple value as values.
func (b *builder) items(v value) []value {
	o := b.lists.at(v.i)
	if o.evN > 0 {
		b.materialize(o)
	}
	if o.derived {
		b.underive(o)
	}
	return o.vals
}

// deriveFrames is off only in tests, which compare with trace entries'
// frames lists kept as listObjs with their items (see listStore).
var deriveFrames = true

// underive rebuilds the items of a derived list from its stack.
func (b *builder) underive(o *listObj) {
	st := b.stacks[o.stack]
	o.vals = make([]value, len(st))
	b.listItems += int64(len(st))
	for i, f := range st {
		o.vals[i] = value{vFrame, int64(b.frameIdx[f])}
	}
	o.derived = false
}

// settle converts v if it is a dict of the snapshot schema, and returns what
// should be stored in its place.
func (b *builder) settle(v value) (value, error) {
	if v.k != vDict {
		return v, nil
	}
	d := &b.dicts[v.i]
	if len(d.keys) == 1 && d.keys[0].k == vMark {
		return d.vals[0], nil // converted earlier, kept because shared
	}
	// Interleave the items as the pickle stack holds them, for convert.
	p := b.pairBuf[:0]
	for j := range d.keys {
		p = append(p, d.keys[j], d.vals[j])
	}
	b.pairBuf = p
	conv, ok, err := b.convert(p)
	if err != nil {
		return value{}, err
	}
	if !ok {
		return v, nil
	}
	return b.recycle(v, d, conv), nil
}

// convert converts a dict of the snapshot schema, given as its items (key,
// value, key, value, ...); ok is false for any other dict.
func (b *builder) convert(p []value) (conv value, ok bool, err error) {
	if len(p) >= 2 && p[0] == (value{vStr, kAction}) {
		// PyTorch writes "action" first: skip the key scan for trace entries.
		conv, err = b.toEvent(p)
		return conv, true, err
	}
	have := keysOf(p)
	switch {
	case have&(1<<kAction) != 0:
		conv, err = b.toEvent(p)
	case have&(1<<kFilename) != 0:
		conv, err = b.toFrame(p)
	case have&(1<<kBlocks|1<<kTotalSize) != 0:
		conv, err = b.toSegment(p)
	case have&(1<<kState) != 0:
		conv, err = b.toBlock(p)
	default:
		return value{}, false, nil
	}
	return conv, true, err
}

// keysOf returns the set of schema keys among items p (key, value, ...).
func keysOf(p []value) (have uint64) {
	for j := 0; j+1 < len(p); j += 2 {
		if k := p[j]; k.k == vStr && k.i < numKeys {
			have |= 1 << uint(k.i)
		}
	}
	return have
}

// settleItems converts dict dv, still empty, from the items of the SETITEMS
// that fills it (key, value, key, value, ... on the pickle stack), without
// storing them in it first. It does so only for trace entries and frames,
// and only when nothing else can touch the dict before the container that
// holds it consumes (settles) it; ok is false otherwise, or when the items
// do not convert (the generic path then reports the error at the same place
// as before).
func (b *builder) settleItems(dv value, items []value) (value, bool) {
	d := &b.dicts[dv.i]
	if len(d.keys) != 0 || len(items) < 2 {
		return value{}, false
	}
	for j := 1; j < len(items); j += 2 {
		if items[j].k == vDict {
			return value{}, false // setItem would settle it first
		}
	}
	conv, ok := b.convertItems(items)
	if !ok {
		return value{}, false
	}
	return b.recycle(dv, d, conv), true
}

// convertItems converts the items of a dict (key, value, ...; at least one
// pair, no value a dict) if they are a trace entry or a frame; ok is false
// for any other dict, or one with a bad field.
func (b *builder) convertItems(items []value) (conv value, ok bool) {
	var err error
	if items[0] == (value{vStr, kAction}) {
		conv, err = b.toEvent(items)
	} else {
		have := keysOf(items)
		switch {
		case have&(1<<kAction) != 0:
			conv, err = b.toEvent(items)
		case have&(1<<kFilename) != 0:
			conv, err = b.toFrame(items)
		default:
			return value{}, false
		}
	}
	return conv, err == nil
}

// recycle replaces dict v, now converted to conv, wherever the memo refers
// to it, and puts its slot back for reuse.
func (b *builder) recycle(v value, d *dictObj, conv value) value {
	if d.memo == -2 {
		// Others may still refer to this slot: leave a forwarding entry.
		d.keys = append(d.keys[:0], value{k: vMark})
		d.vals = append(d.vals[:0], conv)
		return conv
	}
	if d.memo >= 0 {
		b.memo.put(uint64(d.memo), conv)
	}
	d.keys, d.vals, d.memo = d.keys[:0], d.vals[:0], -1
	b.freeDicts = append(b.freeDicts, int32(v.i))
	return conv
}

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
	b.blocks = append(b.blocks, bl)
	return value{vBlock, int64(len(b.blocks) - 1)}, nil
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
		vals := b.items(blocks)
		// Each block dict belongs to one segment: more blocks in segments
		// than block dicts decoded means a list or dict is shared, which
		// could expand a small file without bound.
		if b.segBlocks += len(vals); b.segBlocks > len(b.blocks) {
			return value{}, errors.New("segment: blocks holds a block dict or list that another segment holds too (PyTorch never shares them)")
		}
		s.Blocks = make([]Block, len(vals))
		addr := s.Addr
		for i, bv := range vals {
			if bv.k != vBlock {
				return value{}, fmt.Errorf("segment: blocks[%d] is a %v, want a block dict", i, bv.k)
			}
			br := b.blocks[bv.i]
			if !br.hasAddr {
				br.Addr = addr // older files: addresses are implied by the sizes
			}
			s.Blocks[i] = br.Block
			addr = br.Addr + uint64(br.Size)
		}
	}
	b.segments = append(b.segments, s)
	return value{vSegment, int64(len(b.segments) - 1)}, nil
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
