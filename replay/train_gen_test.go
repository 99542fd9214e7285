package replay

import (
	"context"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// trainSource generates a deterministic, realistic training-loop trace of n
// events: a model's parameters and Adam state allocated once, then steps that
// each allocate an input batch on a copy stream, save activations layer by
// layer in the forward pass with short-lived temporaries, free them in reverse
// in the backward pass while gradients appear, run a foreach optimizer step
// with temporaries, and drop the gradients (zero_grad(set_to_none=True)).
// Sizes are mostly small and medium; every 25 steps the sequence length
// changes, scaling activation sizes. A few thousand blocks are live. Frees are
// synchronous (free_requested + free_completed). It allocates nothing per
// event.
type trainSource struct {
	n, i  int64
	init  []trainOp
	steps [][]trainOp // one program per sequence-length scale
	prog  []trainOp
	pc    int
	step  int
	ev    trace.Event
	half  bool          // the free_completed of the previous op is due
	buf   []trace.Event // NextBatch's
}

// trainBatch is NextBatch's batch size: small enough that its events stay
// in the L1 cache between the generator writing them and the replay reading
// them.
const trainBatch = 64

// trainOp is an alloc or a free of a slot, whose address is
// 1<<40 + slot<<12 (unique among live blocks). A free's size and stream are
// those of the slot's latest alloc, which the program builder fills in.
type trainOp struct {
	addr uint64 // the address, | opFree for a free, | opCopy on the copy stream
	size int64
}

const (
	opFree = 1
	opCopy = 2 // on trainCopyStream; the stream is (addr&opCopy) << 11
)

const (
	trainLayers     = 24
	trainParams     = 25 // per layer
	trainActs       = 30 // saved activations per layer
	trainCopyStream = 0x1000
)

func newTrainSource(n int64) *trainSource {
	x := uint64(0x2545f4914f6cdd1d)
	rnd := func() uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	// draw a size: mostly small (< 1 MiB), some medium (1-16 MiB), few large.
	draw := func(small, medium int) int64 {
		switch c := int(rnd() % 100); {
		case c < small:
			return int64(rnd()%(1<<20-4096)) + 4096
		case c < small+medium:
			return int64(rnd()%(15<<20)) + 1<<20
		default:
			return int64(rnd()%(48<<20)) + 16<<20
		}
	}
	np := trainLayers * trainParams
	param := make([]int64, np)
	for i := range param {
		param[i] = draw(70, 28) &^ 1 // bf16 elements
	}
	act := make([]int64, trainLayers*trainActs)
	for i := range act {
		act[i] = draw(45, 50) &^ 1
	}
	tmp := make([]int64, trainLayers*trainActs)
	for i := range tmp {
		tmp[i] = draw(60, 38) &^ 1
	}
	// Slots: params, 2× Adam state, grads, activations, temporaries, input.
	sParam, sAdam := int32(0), int32(np)
	sGrad := sAdam + int32(2*np)
	sAct := sGrad + int32(np)
	sTmp := sAct + int32(len(act))
	sIn := sTmp + 16
	nslots := int(sIn) + 2
	g := &trainSource{n: n, buf: make([]trace.Event, trainBatch)}
	for i := range g.buf {
		g.buf[i].Stack = trace.NoStack
	}
	addr := func(slot int32) uint64 { return 1<<40 + uint64(slot)<<12 }
	for p := range np {
		g.init = append(g.init, trainOp{addr: addr(sParam + int32(p)), size: param[p]})
	}
	for p := range np {
		g.init = append(g.init,
			trainOp{addr: addr(sAdam + int32(2*p)), size: param[p]},
			trainOp{addr: addr(sAdam + int32(2*p+1)), size: param[p]})
	}
	last := make([]trainOp, nslots)             // the latest alloc of each slot
	for _, scale := range []int64{8, 6, 4, 7} { // sequence length in eighths
		var p []trainOp
		alloc := func(slot int32, size int64, stream uint64) {
			op := trainOp{addr: addr(slot), size: max(size, 1)}
			if stream == trainCopyStream {
				op.addr |= opCopy
			}
			p = append(p, op)
			last[slot] = op
		}
		free := func(slot int32) {
			op := last[slot]
			op.addr |= opFree
			p = append(p, op)
		}
		alloc(sIn, 4<<20*scale/8, trainCopyStream)
		alloc(sIn+1, 64<<10*scale/8, trainCopyStream)
		for l := range trainLayers {
			for a := range trainActs {
				i := l*trainActs + a
				alloc(sAct+int32(i), act[i]*scale/8, 0)
				if a%3 == 2 { // a temporary that dies at once
					alloc(sTmp, tmp[i]*scale/8, 0)
					free(sTmp)
				}
			}
		}
		for l := trainLayers - 1; l >= 0; l-- {
			for k := range 10 {
				alloc(sTmp+int32(k), tmp[l*trainActs+k]*scale/8, 0)
			}
			for k := range 10 {
				free(sTmp + int32(k))
			}
			for q := range trainParams {
				pi := l*trainParams + q
				alloc(sGrad+int32(pi), param[pi], 0)
			}
			for a := trainActs - 1; a >= 0; a-- {
				free(sAct + int32(l*trainActs+a))
			}
		}
		for pi := range np { // foreach Adam: temporaries per parameter
			alloc(sTmp, param[pi], 0)
			alloc(sTmp+1, param[pi], 0)
			free(sTmp)
			free(sTmp + 1)
		}
		for pi := range np { // zero_grad(set_to_none=True)
			free(sGrad + int32(pi))
		}
		free(sIn)
		free(sIn + 1)
		g.steps = append(g.steps, p)
	}
	g.prog = g.init
	return g
}

func (g *trainSource) Next() bool {
	if g.i >= g.n {
		return false
	}
	g.i++
	if g.half {
		g.half = false
		g.ev.Kind = trace.KindFreeCompleted
		g.ev.Seq = g.i - 1
		return true
	}
	if g.pc == len(g.prog) {
		g.nextProg()
	}
	op := g.prog[g.pc]
	g.pc++
	g.ev = op.event(g.i - 1)
	g.half = op.addr&opFree != 0
	return true
}

func (g *trainSource) nextProg() {
	g.prog = g.steps[g.step/25%len(g.steps)]
	g.step++
	g.pc = 0
}

// event returns the op's event (its free_requested, for a free).
func (op trainOp) event(seq int64) trace.Event {
	kind := trace.KindAlloc
	if op.addr&opFree != 0 {
		kind = trace.KindFreeRequested
	}
	return trace.Event{Seq: seq, Kind: kind, Addr: op.addr &^ (opFree | opCopy), Size: op.size,
		Stream: (op.addr & opCopy) << 11, Stack: trace.NoStack}
}

// NextBatch serves the stream Next serves, trainBatch events at a time. It
// writes only the fields that vary: the batch's others keep the values
// newTrainSource set (the replay does not modify the events).
func (g *trainSource) NextBatch() []trace.Event {
	out := g.buf[:min(int64(len(g.buf)), g.n-g.i)]
	k := 0
	if g.half && len(out) > 0 {
		g.half = false
		out[0] = g.ev
		out[0].Kind, out[0].Seq = trace.KindFreeCompleted, g.i
		k = 1
	}
	seq := g.i + int64(k)
	for k < len(out) {
		if g.pc == len(g.prog) {
			g.nextProg()
		}
		op := g.prog[g.pc]
		g.pc++
		e := &out[k]
		e.Seq, e.Addr, e.Size, e.Stream = seq, op.addr&^(opFree|opCopy), op.size, (op.addr&opCopy)<<11
		if op.addr&opFree == 0 {
			e.Kind = trace.KindAlloc
			k++
			seq++
			continue
		}
		e.Kind = trace.KindFreeRequested
		if k+1 == len(out) {
			g.half, g.ev = true, *e
			k++
			break
		}
		f := &out[k+1]
		f.Seq, f.Kind, f.Addr, f.Size, f.Stream = seq+1, trace.KindFreeCompleted, e.Addr, e.Size, e.Stream
		k += 2
		seq += 2
	}
	g.i += int64(k)
	return out[:k]
}

func (g *trainSource) Event() *trace.Event { return &g.ev }
func (g *trainSource) Err() error          { return nil }

// TestTrainSource checks the realistic stream's shape: a few thousand live
// blocks at most, every block freed once, and a cache that settles (no new
// segments once every sequence length has been seen).
func TestTrainSource(t *testing.T) {
	n := int64(2_000_000)
	if testing.Short() {
		n = 300_000
	}
	g := newTrainSource(n)
	live := map[uint64]bool{}
	maxLive, allocs := 0, 0
	var segAfter int
	res, err := Run(context.Background(), g, Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 40},
		ObserverFunc(func(ev *trace.Event) {
			if ev.Kind == trace.KindSegmentAlloc && g.step > 4*25+1 {
				segAfter++
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	g2 := newTrainSource(n)
	for g2.Next() {
		ev := g2.Event()
		switch ev.Kind {
		case trace.KindAlloc:
			if live[ev.Addr] {
				t.Fatalf("event %d: address %#x allocated twice", ev.Seq, ev.Addr)
			}
			live[ev.Addr] = true
			allocs++
			maxLive = max(maxLive, len(live))
		case trace.KindFreeRequested:
			if !live[ev.Addr] {
				t.Fatalf("event %d: free of %#x not live", ev.Seq, ev.Addr)
			}
			delete(live, ev.Addr)
		}
	}
	d := res.Devices[0]
	t.Logf("%d events, %d steps, %d allocs, max live %d, peak reserved %d MiB, segments %d, new segments after warm-up %d",
		n, g.step, allocs, maxLive, d.Stats.ReservedBytes[0].Peak>>20, d.Stats.Segment[0].Current, segAfter)
	if maxLive < 1000 || maxLive > 6000 {
		t.Errorf("max live blocks %d, want a few thousand", maxLive)
	}
	if err := d.Allocator.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestGeneratorBatches checks that the generators' NextBatch serves the
// stream their Next serves, event for event, whatever the length.
func TestGeneratorBatches(t *testing.T) {
	for _, n := range []int64{0, 1, 255, 256, 257, 100_001} {
		for name, mk := range map[string]func(int64) BatchSource{
			"generated": func(n int64) BatchSource { return newGenSource(n) },
			"training":  func(n int64) BatchSource { return newTrainSource(n) },
		} {
			a, b := mk(n), mk(n)
			var got int64
			for {
				evs := b.NextBatch()
				if len(evs) == 0 {
					break
				}
				for i := range evs {
					if !a.Next() {
						t.Fatalf("%s n=%d: NextBatch serves event %d beyond Next's end", name, n, got)
					}
					if *a.Event() != evs[i] {
						t.Fatalf("%s n=%d: event %d: Next %+v, NextBatch %+v", name, n, got, *a.Event(), evs[i])
					}
					got++
				}
			}
			if a.Next() || got != n {
				t.Fatalf("%s n=%d: NextBatch served %d events", name, n, got)
			}
		}
	}
}
