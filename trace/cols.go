package trace

import (
	"fmt"
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
	stack                          []int32
	stackValid                     []byte // validity bitmap of stack (LSB first)
	stackNulls                     int
	recon, pending                 []byte // bitmaps
	n                              int
}

func (c *columns) add(ev *Event, seq int64) {
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
		c.stackNulls++
	} else {
		c.stack = append(c.stack, int32(ev.Stack))
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
	c.stackNulls, c.n = 0, 0
}

// arrays wraps the batch as Arrow arrays in schema order. They borrow the
// slices' memory: write them before the next add.
func (c *columns) arrays(actionDict, stackDict arrow.Array) []arrow.Array {
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
}

// columns checks c's first c.N rows (kinds, stack ids below nstacks) and
// returns them as a batch, borrowing c's slices.
func (s *bulkScratch) columns(c *Columns, seq0 int64, nstacks int) (*columns, error) {
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
	nulls := 0
	for i, id := range stack {
		if id < 0 || int(id) >= nstacks {
			if StackID(id) != NoStack {
				return nil, fmt.Errorf("trace: write event %d: stack id %d was not added", seq0+int64(i), id)
			}
			nulls++
		}
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
		stack: stack, stackValid: valid, stackNulls: nulls, recon: s.zero[:nb], pending: s.zero[:nb], n: n,
	}, nil
}
