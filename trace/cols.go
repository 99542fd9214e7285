package trace

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// columns is a batch of events held column by column in plain Go slices.
// Appending an event is a dozen slice appends; turning the batch into Arrow
// arrays wraps the slices' memory without copying. This is several times
// cheaper per event than Arrow's typed builders, which matters for live
// recording, where the writer sits on the allocator's hot path.
type columns struct {
	seq, timeUs, size, block, used []int64
	device                         []int32
	action                         []int8
	addr, stream, poolA, poolB     []uint64
	stack, frame                   []int32
	stackValid                     []byte // validity bitmap of stack and frame (LSB first)
	stackNulls                     int
	recon, pending                 []byte // bitmaps
	n                              int
}

// add appends ev, the seq-th event; first is the stack table's innermost
// frame of each stack (stackTable.first).
func (c *columns) add(ev *Event, seq int64, first []int32) {
	i := c.n
	c.n++
	c.seq = append(c.seq, seq)
	c.timeUs = append(c.timeUs, ev.TimeUs)
	c.device = append(c.device, ev.Device)
	c.action = append(c.action, int8(ev.Kind-1))
	c.addr = append(c.addr, ev.Addr)
	c.size = append(c.size, ev.Size)
	c.stream = append(c.stream, ev.Stream)
	c.poolA = append(c.poolA, ev.Pool.A)
	c.poolB = append(c.poolB, ev.Pool.B)
	c.block = append(c.block, ev.BlockSize)
	c.used = append(c.used, ev.DeviceUsed)
	if i&7 == 0 {
		c.stackValid = append(c.stackValid, 0)
		c.recon = append(c.recon, 0)
		c.pending = append(c.pending, 0)
	}
	bit := byte(1) << (i & 7)
	if ev.Stack == NoStack {
		c.stack = append(c.stack, 0)
		c.frame = append(c.frame, 0)
		c.stackNulls++
	} else {
		c.stack = append(c.stack, int32(ev.Stack))
		c.frame = append(c.frame, first[ev.Stack])
		c.stackValid[i>>3] |= bit
	}
	if ev.Flags&FlagReconstructed != 0 {
		c.recon[i>>3] |= bit
	}
	if ev.Flags&FlagPending != 0 {
		c.pending[i>>3] |= bit
	}
}

func (c *columns) reset() {
	c.seq, c.timeUs, c.size, c.block, c.used = c.seq[:0], c.timeUs[:0], c.size[:0], c.block[:0], c.used[:0]
	c.device, c.action = c.device[:0], c.action[:0]
	c.addr, c.stream, c.poolA, c.poolB = c.addr[:0], c.stream[:0], c.poolA[:0], c.poolB[:0]
	c.stack, c.stackValid, c.recon, c.pending = c.stack[:0], c.stackValid[:0], c.recon[:0], c.pending[:0]
	c.frame = c.frame[:0]
	c.stackNulls, c.n = 0, 0
}

// arrays wraps the batch as Arrow arrays in schema order. They borrow the
// slices' memory: write them before the next add.
func (c *columns) arrays(actionDict, frameDict, stackDict arrow.Array) []arrow.Array {
	out := make([]arrow.Array, numCols)
	out[idxSeq] = fixed(arrow.PrimitiveTypes.Int64, c.n, arrow.Int64Traits.CastToBytes(c.seq), nil, 0)
	out[idxTimeUs] = fixed(arrow.PrimitiveTypes.Int64, c.n, arrow.Int64Traits.CastToBytes(c.timeUs), nil, 0)
	out[idxDevice] = fixed(arrow.PrimitiveTypes.Int32, c.n, arrow.Int32Traits.CastToBytes(c.device), nil, 0)
	ai := fixed(arrow.PrimitiveTypes.Int8, c.n, arrow.Int8Traits.CastToBytes(c.action), nil, 0)
	out[idxAction] = array.NewDictionaryArray(actionType, ai, actionDict)
	ai.Release()
	out[idxAddr] = fixed(arrow.PrimitiveTypes.Uint64, c.n, arrow.Uint64Traits.CastToBytes(c.addr), nil, 0)
	out[idxSize] = fixed(arrow.PrimitiveTypes.Int64, c.n, arrow.Int64Traits.CastToBytes(c.size), nil, 0)
	out[idxStream] = fixed(arrow.PrimitiveTypes.Uint64, c.n, arrow.Uint64Traits.CastToBytes(c.stream), nil, 0)
	out[idxPoolA] = fixed(arrow.PrimitiveTypes.Uint64, c.n, arrow.Uint64Traits.CastToBytes(c.poolA), nil, 0)
	out[idxPoolB] = fixed(arrow.PrimitiveTypes.Uint64, c.n, arrow.Uint64Traits.CastToBytes(c.poolB), nil, 0)
	var valid []byte
	if c.stackNulls > 0 {
		valid = c.stackValid
	}
	si := fixed(arrow.PrimitiveTypes.Int32, c.n, arrow.Int32Traits.CastToBytes(c.stack), valid, c.stackNulls)
	out[idxStack] = array.NewDictionaryArray(stackType, si, stackDict)
	si.Release()
	fi := fixed(arrow.PrimitiveTypes.Int32, c.n, arrow.Int32Traits.CastToBytes(c.frame), valid, c.stackNulls)
	out[idxFrame] = array.NewDictionaryArray(frameType, fi, frameDict)
	fi.Release()
	out[idxBlock] = fixed(arrow.PrimitiveTypes.Int64, c.n, arrow.Int64Traits.CastToBytes(c.block), nil, 0)
	out[idxReconstructed] = fixed(arrow.FixedWidthTypes.Boolean, c.n, c.recon, nil, 0)
	out[idxPending] = fixed(arrow.FixedWidthTypes.Boolean, c.n, c.pending, nil, 0)
	out[idxDeviceUsed] = fixed(arrow.PrimitiveTypes.Int64, c.n, arrow.Int64Traits.CastToBytes(c.used), nil, 0)
	return out
}

// fixed wraps values (and an optional validity bitmap) as an array of type t.
func fixed(t arrow.DataType, n int, values, valid []byte, nulls int) arrow.Array {
	var vb *memory.Buffer
	if valid != nil {
		vb = memory.NewBufferBytes(valid)
	}
	data := array.NewData(t, n, []*memory.Buffer{vb, memory.NewBufferBytes(values)}, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// bulkScratch holds the columns WriteColumns adds to the caller's: seq,
// device, the action indexes, the flag bitmaps (all zero) and the stack
// validity. They are reused from one batch to the next.
type bulkScratch struct {
	seq        []int64
	device     []int32
	dev        int32 // the value device is filled with
	action     []int8
	zero       []byte
	stackValid []byte
	frame      []int32
}

// columns checks c's first c.N rows (kinds, stack ids below len(first))
// and returns them as a batch, borrowing c's slices.
func (s *bulkScratch) columns(c *Columns, seq0 int64, first []int32) (*columns, error) {
	nstacks := len(first)
	n := c.N
	if len(c.TimeUs) < n || len(c.Kind) < n || len(c.Addr) < n || len(c.Size) < n || len(c.Stream) < n ||
		len(c.PoolA) < n || len(c.PoolB) < n || len(c.Stack) < n || len(c.BlockSize) < n || len(c.DeviceUsed) < n {
		return nil, fmt.Errorf("trace: write columns: a column holds fewer than %d rows", n)
	}
	if cap(s.seq) < n {
		s.seq = make([]int64, n)
		s.device = make([]int32, n)
		s.dev = 0
		s.action = make([]int8, n)
		s.zero = make([]byte, (n+7)/8)
		s.stackValid = make([]byte, (n+7)/8)
		s.frame = make([]int32, n)
	}
	seq, action := s.seq[:n], s.action[:n]
	for i := range seq {
		seq[i] = seq0 + int64(i)
	}
	if s.dev != c.Device {
		for i := range s.device {
			s.device[i] = c.Device
		}
		s.dev = c.Device
	}
	for i, k := range c.Kind[:n] {
		if !k.Valid() {
			return nil, fmt.Errorf("trace: write event %d: invalid kind %v", seq0+int64(i), k)
		}
		action[i] = int8(k - 1)
	}
	stack := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(c.Stack))), n)
	frame := s.frame[:n]
	nulls := 0
	for i, id := range stack {
		if id < 0 || int(id) >= nstacks {
			if StackID(id) != NoStack {
				return nil, fmt.Errorf("trace: write event %d: stack id %d was not added", seq0+int64(i), id)
			}
			nulls++
			frame[i] = 0
			continue
		}
		frame[i] = first[id]
	}
	nb := (n + 7) / 8
	valid := s.stackValid[:nb]
	if nulls > 0 {
		clear(valid)
		for i, id := range stack {
			if StackID(id) != NoStack {
				valid[i>>3] |= 1 << (i & 7)
			}
		}
	}
	return &columns{
		seq: seq, timeUs: c.TimeUs[:n], size: c.Size[:n], block: c.BlockSize[:n], used: c.DeviceUsed[:n],
		device: s.device[:n], action: action, addr: c.Addr[:n], stream: c.Stream[:n], poolA: c.PoolA[:n], poolB: c.PoolB[:n],
		stack: stack, frame: frame, stackValid: valid, stackNulls: nulls, recon: s.zero[:nb], pending: s.zero[:nb], n: n,
	}, nil
}

// addEvents appends evs to the batch, each row exactly as add lays it out
// (so the bytes written are the same), with seqs from seq0 and stack ids
// mapped through stackMap (nil: as they are). It checks each event as Write
// does, against nstacks added stacks, and stops before the first bad one,
// returning its index in evs and the error Write would have given.
//
// It is add without its per-event call and appends: each column grows once,
// and rows are stored by index in one pass over evs (one read of each
// event, a dozen sequential write streams). Many rows are laid out in parts
// on goroutines of their own (see layoutPart).
func (c *columns) addEvents(evs []Event, stackMap []StackID, seq0 int64, first []int32) (int, error) {
	nstacks := len(first)
	n0, k := c.n, len(evs)
	n := n0 + k
	c.seq = growTo(c.seq, n)
	c.timeUs = growTo(c.timeUs, n)
	c.device = growTo(c.device, n)
	c.action = growTo(c.action, n)
	c.addr = growTo(c.addr, n)
	c.size = growTo(c.size, n)
	c.stream = growTo(c.stream, n)
	c.poolA = growTo(c.poolA, n)
	c.poolB = growTo(c.poolB, n)
	c.block = growTo(c.block, n)
	c.used = growTo(c.used, n)
	c.stack = growTo(c.stack, n)
	c.frame = growTo(c.frame, n)
	nb := (n + 7) / 8
	c.stackValid = growBits(c.stackValid, nb)
	c.recon = growBits(c.recon, nb)
	c.pending = growBits(c.pending, nb)
	parts := min(runtime.GOMAXPROCS(0), k/layoutPart)
	if parts <= 1 {
		nulls, stop := c.fill(n0, evs, 0, k, stackMap, seq0, first)
		c.stackNulls += nulls
		if stop < k {
			return c.cut(n0, stop), rowError(&evs[stop], stackMap, seq0+int64(stop), nstacks)
		}
		c.n = n
		return k, nil
	}
	// Part p is evs[bound(p):bound(p+1)], starting on a row that is a
	// multiple of 8.
	bound := func(p int) int {
		switch p {
		case 0:
			return 0
		case parts:
			return k
		}
		return min(k, (n0+p*k/parts+7)&^7-n0)
	}
	type result struct{ nulls, stop int }
	res := make([]result, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := bound(p), bound(p+1)
		wg.Go(func() {
			res[p].nulls, res[p].stop = c.fill(n0, evs, lo, hi, stackMap, seq0, first)
		})
	}
	wg.Wait()
	// As one pass would: the rows before the first bad event, if any.
	for p := range parts {
		c.stackNulls += res[p].nulls
		if stop := res[p].stop; stop < bound(p+1) {
			return c.cut(n0, stop), rowError(&evs[stop], stackMap, seq0+int64(stop), nstacks)
		}
	}
	c.n = n
	return k, nil
}

// layoutPart is the fewest rows addEvents lays out on a goroutine of its
// own: a batch's columns are mostly memory new to the process (about 90
// bytes a row), and faulting it in costs more than writing the rows, so a
// large batch is laid out on up to GOMAXPROCS goroutines, whose page faults
// run on as many cores. (A variable for tests.)
var layoutPart = 8 << 10

// fill lays out evs[lo:hi] as rows n0+lo... of c, whose columns already
// hold them, as addEvents describes (first: see add). It returns the rows with no stack, and
// the index in evs of the first event it refused (hi if none), where it
// stopped. Concurrent calls must lay out rows whose bitmap bytes differ.
func (c *columns) fill(n0 int, evs []Event, lo, hi int, stackMap []StackID, seq0 int64, first []int32) (nulls, stop int) {
	nstacks := len(first)
	seq, timeUs, device, action := c.seq[n0:], c.timeUs[n0:], c.device[n0:], c.action[n0:]
	addr, size, stream, poolA, poolB := c.addr[n0:], c.size[n0:], c.stream[n0:], c.poolA[n0:], c.poolB[n0:]
	block, used, stack, frame := c.block[n0:], c.used[n0:], c.stack[n0:], c.frame[n0:]
	valid, recon, pending := c.stackValid, c.recon, c.pending
	for j := lo; j < hi; j++ {
		ev := &evs[j]
		id := ev.Stack
		if id != NoStack && stackMap != nil {
			if id < 0 || int(id) >= len(stackMap) {
				return nulls, j
			}
			id = stackMap[id]
		}
		if !ev.Kind.Valid() || id != NoStack && (id < 0 || int(id) >= nstacks) {
			return nulls, j
		}
		seq[j] = seq0 + int64(j)
		timeUs[j] = ev.TimeUs
		device[j] = ev.Device
		action[j] = int8(ev.Kind - 1)
		addr[j] = ev.Addr
		size[j] = ev.Size
		stream[j] = ev.Stream
		poolA[j] = ev.Pool.A
		poolB[j] = ev.Pool.B
		block[j] = ev.BlockSize
		used[j] = ev.DeviceUsed
		i := n0 + j
		bit := byte(1) << (i & 7)
		if id == NoStack {
			stack[j] = 0
			frame[j] = 0
			nulls++
		} else {
			stack[j] = int32(id)
			frame[j] = first[id]
			valid[i>>3] |= bit
		}
		if ev.Flags&FlagReconstructed != 0 {
			recon[i>>3] |= bit
		}
		if ev.Flags&FlagPending != 0 {
			pending[i>>3] |= bit
		}
	}
	return nulls, hi
}

// rowError is the error Write gives for ev, the seq-th event of the trace,
// with its stack id mapped through stackMap (nil: as it is), when the
// writer has nstacks stacks; nil when it can be written.
func rowError(ev *Event, stackMap []StackID, seq int64, nstacks int) error {
	id := ev.Stack
	if id != NoStack && stackMap != nil {
		if id < 0 || int(id) >= len(stackMap) {
			return checkEvent(ev.Kind, id, seq, 0)
		}
		id = stackMap[id]
	}
	return checkEvent(ev.Kind, id, seq, nstacks)
}

// cut ends an addEvents that stopped after j of its events, added from row
// n0 on: the batch keeps n0+j rows, as if add had been called j times.
func (c *columns) cut(n0, j int) int {
	n := n0 + j
	c.seq, c.timeUs, c.size, c.block, c.used = c.seq[:n], c.timeUs[:n], c.size[:n], c.block[:n], c.used[:n]
	c.device, c.action = c.device[:n], c.action[:n]
	c.addr, c.stream, c.poolA, c.poolB, c.stack = c.addr[:n], c.stream[:n], c.poolA[:n], c.poolB[:n], c.stack[:n]
	c.frame = c.frame[:n]
	nb := (n + 7) / 8
	c.stackValid, c.recon, c.pending = c.stackValid[:nb], c.recon[:nb], c.pending[:nb]
	if n&7 != 0 { // bits of the rows not added stay clear
		mask := byte(1)<<(n&7) - 1
		c.stackValid[nb-1] &= mask
		c.recon[nb-1] &= mask
		c.pending[nb-1] &= mask
	}
	c.n = n
	return j
}

// reserve gives every column room for n rows, keeping the rows it holds.
func (c *columns) reserve(n int) {
	nb := (n + 7) / 8
	c.seq, c.timeUs, c.size, c.block, c.used = withCap(c.seq, n), withCap(c.timeUs, n),
		withCap(c.size, n), withCap(c.block, n), withCap(c.used, n)
	c.device, c.action = withCap(c.device, n), withCap(c.action, n)
	c.addr, c.stream = withCap(c.addr, n), withCap(c.stream, n)
	c.poolA, c.poolB = withCap(c.poolA, n), withCap(c.poolB, n)
	c.stack, c.frame = withCap(c.stack, n), withCap(c.frame, n)
	c.stackValid, c.recon, c.pending = withCap(c.stackValid, nb), withCap(c.recon, nb), withCap(c.pending, nb)
}

// withCap returns s with room for n values, keeping its values. A new
// array comes from make rather than append (which slices.Grow uses): the
// room is written before it is read, and make does not clear memory new to
// the process, where append would fault all of it in at once, before the
// rows are laid out (and on one goroutine).
func withCap[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s
	}
	t := make([]T, len(s), n)
	copy(t, s)
	return t
}

// growTo returns s with length n, keeping its first len(s) values (see
// withCap); the others are the caller's to set.
func growTo[T any](s []T, n int) []T {
	if cap(s) < n {
		s = withCap(s, max(n, 2*cap(s)))
	}
	return s[:n]
}

// growBits returns bitmap b with nb bytes, the new ones zero.
func growBits(b []byte, nb int) []byte {
	old := len(b)
	b = growTo(b, nb)
	clear(b[old:])
	return b
}
