package torchsnap

import (
	"math/rand"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// TestGatherRun: runs of events spanning many chunks and several parts are
// copied exactly (on two goroutines), the store is released behind them, and
// a run used twice is an error.
func TestGatherRun(t *testing.T) {
	testGatherRun(t, 0, 0)
	// A base that holds the first chunks: device 0's run is partly in it
	// (copied), device 1's not at all.
	testGatherRun(t, 3<<chunkBits*48, 0)
	// A base that holds everything: both runs are views.
	testGatherRun(t, 21<<chunkBits*48, 2)
}

func testGatherRun(t *testing.T, size int64, views int) {
	b := newBuilder()
	b.events.sizeFor(size)
	pools := []trace.PoolID{{}, {A: 7, B: 9}}
	const n0, n1 = 20<<chunkBits + 123, 5000 // device 1's run starts inside device 0's last chunk
	for i := range int64(n0 + n1) {
		b.events.add(&cev{TimeUs: i, Addr: uint64(i) * 512, Size: i + 1, Stream: uint64(i % 3),
			Stack: trace.StackID(i%5) - 1, Pool: pools[i%2], Kind: trace.Kind(1 + i%3)})
	}
	runs := []*listObj{{evLo: 0, evN: n0}, {evLo: n0, evN: n1}}
	for dev, o := range runs {
		d := &Device{Index: int32(dev)}
		evs, err := b.gatherRun(o, d)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(evs)) != o.evN {
			t.Fatalf("device %d: %d events, want %d", dev, len(evs), o.evN)
		}
		for j, e := range evs {
			i := o.evLo + int64(j)
			want := trace.Event{Seq: int64(j), TimeUs: i, Device: int32(dev), Kind: trace.Kind(1 + i%3), Addr: uint64(i) * 512,
				Size: i + 1, Stream: uint64(i % 3), Pool: pools[i%2], Stack: trace.StackID(i%5) - 1}
			if e != want {
				t.Fatalf("device %d event %d: %+v, want %+v", dev, j, e, want)
			}
		}
	}
	if len(b.events.views) != views {
		t.Errorf("base for %d bytes: %d runs viewed in place, want %d", size, len(b.events.views), views)
	}
	if b.events.chunks[n0>>chunkBits-1] != nil {
		t.Error("chunks behind the copy were not released")
	}
	if _, err := b.gatherRun(runs[0], &Device{}); err == nil {
		t.Error("a run gathered twice: no error")
	}
}

// Memo slots keep values that do not fit their 32 bits (a hostile pickle may
// memoize any number) exactly, and a slot stored again holds the new value.
func TestMemoWide(t *testing.T) {
	var m memo
	vals := []value{
		{vStr, 7}, intValue(1 << 40), {vUint, -1}, floatValue(2.5), intValue(-(1 << 31)), intValue(1<<31 - 1),
		intValue(1 << 31), {vList, -4}, boolValue(true),
	}
	for i, v := range vals {
		m.put(uint64(i), v)
	}
	for i, v := range vals {
		if got, ok := m.get(uint64(i)); !ok || got != v {
			t.Errorf("slot %d: %+v %v, want %+v", i, got, ok, v)
		}
		if got, ok := m.getDense(uint64(i)); !ok || got != v {
			t.Errorf("slot %d (dense): %+v %v, want %+v", i, got, ok, v)
		}
	}
	// Stored again, the other way round: wide over narrow, narrow over wide.
	m.put(0, intValue(1<<50))
	m.put(1, value{vStr, 9})
	if got, _ := m.get(0); got != intValue(1<<50) {
		t.Errorf("slot 0 stored again: %+v", got)
	}
	if got, _ := m.get(1); got != (value{vStr, 9}) {
		t.Errorf("slot 1 stored again: %+v", got)
	}
	if len(m.wide) != 3 { // slots 0, 3, 6 (1 no longer; 2, vUint -1, and 7, a compact list, fit)
		t.Errorf("%d wide slots, want 3: %v", len(m.wide), m.wide)
	}
	// A slot far past the dense part, and putRun as a region commits.
	m.put(1000, intValue(1<<45))
	if got, ok := m.get(1000); !ok || got != intValue(1<<45) {
		t.Errorf("sparse slot: %+v %v", got, ok)
	}
	n := m.n
	m.putRun([]vkind{vInt, vStr}, []int64{1 << 33, 4})
	if a, _ := m.get(n); a != intValue(1<<33) {
		t.Errorf("appended wide slot: %+v", a)
	}
	if b, _ := m.get(n + 1); b != (value{vStr, 4}) {
		t.Errorf("appended slot: %+v", b)
	}
}

// TestPutRun: runs stored by putRun, across chunks and with values too
// wide for a slot, leave the memo as put of each slot in turn does.
func TestPutRun(t *testing.T) {
	var want, got memo
	want.sizeFor(1 << 20)
	got.sizeFor(1 << 20)
	rng := rand.New(rand.NewSource(1))
	for want.n < 3*memoChunk+100 {
		n := 1 + rng.Intn(3000)
		ks, vs := make([]vkind, n), make([]int64, n)
		for i := range n {
			ks[i], vs[i] = vkind(1+rng.Intn(int(vList))), int64(rng.Intn(1<<20))
			if rng.Intn(500) == 0 {
				vs[i] = 1 << 40
			}
			want.put(want.n, value{ks[i], vs[i]})
		}
		got.putRun(ks, vs)
	}
	sameMemo(t, &got, &want)
}

// sameMemo fails t unless got holds what want does: as many slots, in as
// many chunks, as many of them wide, the first chunk as long, and each
// slot's value.
func sameMemo(t *testing.T, got, want *memo) {
	t.Helper()
	if got.n != want.n || len(got.k) != len(want.k) || len(got.wide) != len(want.wide) || len(got.k0) != len(want.k0) {
		t.Fatalf("n %d, %d chunks, %d wide, first chunk %d; want %d, %d, %d, %d", got.n, len(got.k), len(got.wide), len(got.k0), want.n, len(want.k), len(want.wide), len(want.k0))
	}
	for i := range want.n {
		w, _ := want.get(i)
		if g, _ := got.get(i); g != w {
			t.Fatalf("slot %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestPutFits: slots stored by putFits (or putEach where they do not fit),
// across chunks, in a first chunk grown by append, and with values too wide
// for a slot, leave the memo as put of each slot in turn does.
func TestPutFits(t *testing.T) {
	for _, size := range []int64{1 << 10, 1 << 20, 1 << 24} {
		var want, got memo
		want.sizeFor(size)
		got.sizeFor(size)
		rng := rand.New(rand.NewSource(size))
		for want.n < 3*memoChunk+100 {
			vs := make([]value, 1+rng.Intn(4))
			for i := range vs {
				vs[i] = value{vkind(1 + rng.Intn(int(vList))), int64(rng.Intn(1 << 20))}
				if rng.Intn(500) == 0 {
					vs[i].i = 1 << 40
				}
				want.put(want.n, vs[i])
			}
			if !got.putFits(vs[0], vs[1:]) {
				got.putEach(vs[0], vs[1:])
			}
			for c := range got.k {
				if cap(got.k[c]) > memoChunk || len(got.k[c]) != len(got.v[c]) {
					t.Fatalf("chunk %d: %d slots, room for %d", c, len(got.k[c]), cap(got.k[c]))
				}
			}
		}
		sameMemo(t, &got, &want)
	}
}
