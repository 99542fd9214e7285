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
// columns.add would (the same bytes), seqs from seq0; frameOf is the
// frame column's value for stack id+1 (0 for NoStack, then
// stackTable.first: see StreamWriter.frames). It stops before the first
// event Write would refuse and returns its index in evs, len(evs) if none.
func (p *piece) add(evs []Event, seq0 int64, frameOf []int32) int {
	j, row := 0, p.n
	for ; j < len(evs); j, row = j+1, row+1 {
		ev := &evs[j]
		id := ev.Stack
		a := ev.Kind - 1                                      // the action column's value
		f := int(id) + 1                                      // one test for id in [NoStack, stacks)
		if a >= numKinds-1 || uint(f) >= uint(len(frameOf)) { // as !Kind.Valid()
			break
		}
		i := row & (streamPiece - 1)
		p.seq[i] = seq0 + int64(j)
		p.timeUs[i] = ev.TimeUs
		p.device[i] = ev.Device
		p.action[i] = int8(a)
		p.addr[i] = ev.Addr
		p.size[i] = ev.Size
		p.stream[i] = ev.Stream
		p.poolA[i] = ev.Pool.A
		p.poolB[i] = ev.Pool.B
		p.block[i] = ev.BlockSize
		p.used[i] = ev.DeviceUsed
		p.frame[i] = frameOf[f]
		if f == 0 { // NoStack
			p.stack[i] = 0
			p.nulls++
		} else {
			p.stack[i] = int32(f - 1)
			p.valid[i>>3] |= 1 << (i & 7)
		}
		if ev.Flags != 0 { // rare: reconstructed events
			p.setFlags(i, ev.Flags)
		}
	}
	p.n += j
	return j
}

// addMapped is add with evs' stack ids mapped through stackMap (NoStack
// stays NoStack): it hands add copies of evs, a few at a time, with their
// ids mapped, which keeps the mapping out of add's loop (an import's
// stack ids are the writer's but for rare snapshots).
func (p *piece) addMapped(evs []Event, stackMap []StackID, seq0 int64, frameOf []int32) int {
	var buf [64]Event
	done := 0
	for done < len(evs) {
		part := evs[done:min(len(evs), done+len(buf))]
		k := 0
		for ; k < len(part); k++ {
			buf[k] = part[k]
			if id := part[k].Stack; id != NoStack {
				if uint(int(id)) >= uint(len(stackMap)) {
					break // refused: add stops before it
				}
				buf[k].Stack = stackMap[id]
			}
		}
		j := p.add(buf[:k], seq0+int64(done), frameOf)
		done += j
		if j < len(part) {
			break
		}
	}
	return done
}

// setFlags sets row i's bits of the flag bitmaps. It is not inlined:
// add's loop then keeps no value for it.
//
//go:noinline
func (p *piece) setFlags(i int, fl Flags) {
	i &= streamPiece - 1
	if fl&FlagReconstructed != 0 {
		p.recon[i>>3] |= 1 << (i & 7)
	}
	if fl&FlagPending != 0 {
		p.pending[i>>3] |= 1 << (i & 7)
	}
}
