package trace

// piece is the rows of a batch a StreamWriter lays out before writing
// them, column by column as the batch's body holds them. Each column is an
// array of streamPiece values, so that a row is stored at an index the
// compiler knows in bounds, off the one pointer to the piece, where the
// slices of columns cost a bounds check and a slice header each.
type piece struct {
	seq, timeUs, size, block, used [streamPiece]int64
	addr, stream, poolA, poolB     [streamPiece]uint64
	device, stack, frame           [streamPiece]int32
	action                         [streamPiece]int8
	valid, recon, pending          [streamPiece / 8]byte // bitmaps (LSB first): stack and frame validity, the flags
	n                              int                   // rows laid out
	nulls                          int                   // rows without a stack
}

// reset empties p.
func (p *piece) reset() {
	clear(p.valid[:])
	clear(p.recon[:])
	clear(p.pending[:])
	p.n, p.nulls = 0, 0
}

// add lays out evs as rows p.n... of p, which has room for them, as
// columns.add would (the same bytes): seqs from seq0, stack ids mapped
// through stackMap (nil: as they are), frameOf the frame column's value
// for stack id+1 (0 for NoStack, then stackTable.first: see
// StreamWriter.frames). It stops before the first event Write would
// refuse and returns its index in evs, len(evs) if none.
func (p *piece) add(evs []Event, stackMap []StackID, seq0 int64, frameOf []int32) int {
	n0 := p.n
	j := 0
	for ; j < len(evs); j++ {
		ev := &evs[j]
		id := ev.Stack
		if id != NoStack && stackMap != nil {
			k := int(id)
			if uint(k) >= uint(len(stackMap)) {
				break
			}
			id = stackMap[k]
		}
		f := int(id) + 1 // one test for id in [NoStack, stacks)
		if !ev.Kind.Valid() || uint(f) >= uint(len(frameOf)) {
			break
		}
		i := (n0 + j) & (streamPiece - 1)
		p.seq[i] = seq0 + int64(j)
		p.timeUs[i] = ev.TimeUs
		p.device[i] = ev.Device
		p.action[i] = int8(ev.Kind - 1)
		p.addr[i] = ev.Addr
		p.size[i] = ev.Size
		p.stream[i] = ev.Stream
		p.poolA[i] = ev.Pool.A
		p.poolB[i] = ev.Pool.B
		p.block[i] = ev.BlockSize
		p.used[i] = ev.DeviceUsed
		p.frame[i] = frameOf[f]
		if id == NoStack {
			p.stack[i] = 0
			p.nulls++
		} else {
			p.stack[i] = int32(id)
			p.valid[i>>3] |= 1 << (i & 7)
		}
		if ev.Flags != 0 { // rare: reconstructed events
			p.setFlags(i, ev.Flags)
		}
	}
	p.n += j
	return j
}

// setFlags sets row i's bits of the flag bitmaps.
func (p *piece) setFlags(i int, fl Flags) {
	i &= streamPiece - 1
	if fl&FlagReconstructed != 0 {
		p.recon[i>>3] |= 1 << (i & 7)
	}
	if fl&FlagPending != 0 {
		p.pending[i>>3] |= 1 << (i & 7)
	}
}
