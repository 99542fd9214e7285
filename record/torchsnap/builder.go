package torchsnap

import (
	"fmt"
	"math"
	"slices"

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
	regions []RegionSpan // the regions run (tryRegion)

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

	events     eventStore
	blockStore // the segments' blocks (blockslab.go)
	segments   []segRec

	memo memo
	// ahead is what blockAhead did, once it is stopped.
	ahead AheadSpan
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
	if v.k == vEvent && len(o.vals) == 0 && o.blkN == 0 && (o.evN == 0 || v.i == o.evLo+o.evN) {
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

// appendEvents appends to list l the leading items that are events, each
// the one after the one before it, as appendItem for each in turn would: to
// the list's run of events (evLo, evN). It returns how many it appended; the
// rest are left to appendItem. A trace list's APPENDS adds 1,000 entries
// this way, converted by flatEvent.
func (b *builder) appendEvents(l value, items []value) int {
	if l.k != vList || len(items) == 0 || items[0].k != vEvent {
		return 0
	}
	o := b.lists.at(l.i)
	if o.derived || len(o.vals) != 0 || o.blkN != 0 {
		return 0
	}
	n := 0
	for _, v := range items {
		if v.k != vEvent || o.evN != 0 && v.i != o.evLo+o.evN {
			break
		}
		if o.evN == 0 {
			o.evLo = v.i
		}
		o.evN++
		n++
	}
	return n
}

// appendBlocks appends blocks lo to lo+n-1 to list l, a list, as
// appendItem for each in turn would: as a run of blocks (blkLo, blkN) where
// l is empty or such a run ending at lo, else as values.
func (b *builder) appendBlocks(l value, lo, n int64) {
	o := b.lists.at(l.i)
	if o.derived {
		b.underive(o)
	}
	b.listItems += n // see unpickler.bounded
	if len(o.vals) == 0 && o.evN == 0 && (o.blkN == 0 || o.blkLo+o.blkN == lo) {
		if o.blkN == 0 {
			o.blkLo = lo
		}
		o.blkN += n
		return
	}
	b.materialize(o)
	for i := range n {
		o.vals = append(o.vals, value{vBlock, lo + i})
	}
	blockValues.Add(n)
}

// reserveList makes room for items about to be appended to an empty list,
// unless they are events (kept as a run, not as values).
func (b *builder) reserveList(l value, items []value) {
	if l.k != vList || len(items) == 0 || items[0].k == vEvent {
		return
	}
	if o := b.lists.at(l.i); len(o.vals) == 0 && o.evN == 0 && o.blkN == 0 && !o.derived {
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

// blockRun returns the items of list l as a run of blocks if flatBlocks
// left them as one (appendBlocks), else their number.
func (b *builder) blockRun(l value) (lo, n int64, ok bool) {
	o := b.lists.at(l.i)
	if o.blkN > 0 && len(o.vals) == 0 && o.evN == 0 && !o.derived {
		return o.blkLo, o.blkN, true
	}
	return 0, int64(len(b.items(l))), false
}

// materialize turns a run of events or blocks back into one value each,
// for a list that turned out not to be a plain trace or blocks list.
func (b *builder) materialize(o *listObj) {
	for i := int64(0); i < o.blkN; i++ {
		o.vals = append(o.vals, value{vBlock, o.blkLo + i})
	}
	if o.blkN > 0 {
		blockValues.Add(o.blkN)
		o.blkN = 0
	}
	for i := int64(0); i < o.evN; i++ {
		o.vals = append(o.vals, value{vEvent, o.evLo + i})
	}
	o.evN = 0
}

// items returns the elements of a list or tuple value as values.
func (b *builder) items(v value) []value {
	o := b.lists.at(v.i)
	if o.evN > 0 || o.blkN > 0 {
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
