package allocator

import (
	"math/rand/v2"
	"testing"
)

// flushPends puts every pool's pending member into its class: an
// allocator flushed after each step works on the plain set.
func flushPends(a *Allocator) {
	for _, p := range a.pools {
		if p != nil {
			p.blocks.flush()
		}
	}
}

// runPend drives allocator 0, which keeps its pending members from step
// to step, and allocator 1, flushed after every step, through data's
// operations in lockstep (same results, events, statistics and layout),
// and returns the steps that began with a pending member, those that
// began with two, those that began with an expandable segment's end
// pending (pend[2]), and those that changed them.
func runPend(t testing.TB, conf string, data []byte) (held, both, tail, used int) {
	c, err := ParseConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	var as [2]*Allocator
	for i := range as {
		dev := NewSimDevice(1 * gib)
		dev.ContextOverhead = 100 * mib
		if as[i], err = New(c, dev); err != nil {
			t.Fatal(err)
		}
	}
	l := newLockstep(t, as[0], as[1])
	for step := 0; len(data) >= 4; step++ {
		before := as[0].small.blocks.pend
		if before[0].id != 0 {
			held++
		}
		if before[1].id != 0 {
			both++
		}
		if before[2].id != 0 {
			tail++
		}
		l.step(step, data[:4])
		if after := as[0].small.blocks.pend; before[0].id|before[2].id != 0 && after != before {
			used++
		}
		flushPends(as[1])
		data = data[4:]
	}
	return held, both, tail, used
}

// pendOps makes n operations for runPend: mostly small mallocs and frees
// (of every kind lockstep has), so that segments split and merge, with the
// other operations among them (streams, record_stream, captures,
// empty_cache, limits that release).
func pendOps(r *rand.Rand, n int) []byte {
	data := make([]byte, 0, 4*n)
	for range n {
		op := []byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(8)), byte(r.IntN(256))}
		switch x := r.IntN(10); {
		case x < 4:
			op[0] = byte(r.IntN(5) * 16)       // a malloc
			op[1] = op[1]&^3 | byte(r.IntN(2)) // small sizes
			op[1] &^= 0xc0                     // stream 0
			if r.IntN(8) == 0 {
				op[1] |= 0x40 // stream 256
			}
		case x < 7:
			op[0] = byte(6 + r.IntN(3)) // a free
		case op[0]%16 == 11 && op[1]&1 == 0 && r.IntN(4) != 0:
			op[1] |= 1 // most captures end soon (a malloc in one takes the slow path)
		}
		data = append(data, op...)
	}
	return data
}

// TestPendLockstep: a free set with a pending member gives what the plain
// set gives, through frees merging into it from either side, mallocs on
// another stream, record_stream, captures and releases while it is set;
// under expandable_segments with the segment's end pending too, through
// the expandable scan from it and to it.
func TestPendLockstep(t *testing.T) {
	for _, conf := range []string{"", "max_split_size_mb:20", "garbage_collection_threshold:0.5", "expandable_segments:True"} {
		held, both, tail, used := 0, 0, 0, 0
		for seed := range uint64(6) {
			h, b, e, u := runPend(t, conf, pendOps(rand.New(rand.NewPCG(seed, 7)), 3000))
			held, both, tail, used = held+h, both+b, tail+e, used+u
		}
		t.Logf("%q: %d steps began with a pending member, %d with two, %d with a segment's end; %d changed them", conf, held, both, tail, used)
		if held < 1000 || both < 500 || used < 500 {
			t.Errorf("%q: %d steps began with a pending member, %d with two, %d changed them: the test drives too little of them", conf, held, both, used)
		}
		if exp := conf == "expandable_segments:True"; exp != (tail > 500) || !exp && tail != 0 {
			t.Errorf("%q: %d steps began with a segment's end pending", conf, tail)
		}
	}
}

// FuzzPend is TestPendLockstep on arbitrary operations.
func FuzzPend(f *testing.F) {
	f.Add(uint8(0), pendOps(rand.New(rand.NewPCG(1, 2)), 400))
	f.Fuzz(func(t *testing.T, conf uint8, data []byte) {
		confs := []string{"", "max_split_size_mb:20", "garbage_collection_threshold:0.5", "expandable_segments:True"}
		runPend(t, confs[int(conf)%len(confs)], data)
	})
}
