package trace

import (
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
