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
// through stackMap (nil: as they are), first the innermost frame of each
// of the writer's stacks (stackTable.first). It stops before the first
// event Write would refuse and returns its index in evs, len(evs) if none.
func (p *piece) add(evs []Event, stackMap []StackID, seq0 int64, first []int32) int {
	nstacks := len(first)
	n0 := p.n
	for j := range evs {
		ev := &evs[j]
		id := ev.Stack
		if id != NoStack && stackMap != nil {
			if id < 0 || int(id) >= len(stackMap) {
				return p.stop(j)
			}
			id = stackMap[id]
		}
		if !ev.Kind.Valid() || id != NoStack && (id < 0 || int(id) >= nstacks) {
			return p.stop(j)
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
		bit := byte(1) << (i & 7)
		if id == NoStack {
			p.stack[i] = 0
			p.frame[i] = 0
			p.nulls++
		} else {
			p.stack[i] = int32(id)
			p.frame[i] = first[id]
			p.valid[i>>3] |= bit
		}
		if ev.Flags&FlagReconstructed != 0 {
			p.recon[i>>3] |= bit
		}
		if ev.Flags&FlagPending != 0 {
			p.pending[i>>3] |= bit
		}
	}
	return p.stop(len(evs))
}

// stop ends an add that laid out j rows.
func (p *piece) stop(j int) int {
	p.n += j
	return j
}
