package allocator

import (
	"math"
	"math/bits"
	"math/rand"
	"testing"
)

// The tests of this file count work, not time: the nodes and entries the
// free sets touch (treeWork, flatWork) and the places of pending that
// ProcessEvents reads (pendWork), per operation, at a million keys
// inserted and removed in ascending, descending and random order.

const workN = 1 << 20

// workBound is the most work one operation may do in a structure of n
// keys: 40·log2 n, 840 at a million (a B+tree node of 64 entries moved on
// a few levels). The flat structures these replaced pass it once they hold
// a thousand keys (TestWork_flatControl).
func workBound(n int) int { return 40 * bits.Len(uint(n)) }

func work() int { return treeWork + flatWork + pendWork }

func init() { countWork = true }

var workOrders = []string{"ascending", "descending", "random"}

// workPerm is 0..n-1 in the named order.
func workPerm(n int, order string) []int {
	p := make([]int, n)
	for i := range p {
		switch order {
		case "descending":
			p[i] = n - 1 - i
		default:
			p[i] = i
		}
	}
	if order == "random" {
		rand.New(rand.NewSource(int64(n))).Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	}
	return p
}

// opWork runs op and fails t if it did more than bound work.
func opWork(t *testing.T, what string, i, bound int, op func()) int {
	t.Helper()
	w := work()
	op()
	d := work() - w
	if d > bound {
		t.Fatalf("%s %d: work %d, more than %d", what, i, d, bound)
	}
	return d
}

// sizeSetClassWork fills one size class of a sizeSet with n blocks, then
// takes each by lower bound and removes it, in the order given, and
// returns the most work one operation did (failing t past bound).
func sizeSetClassWork(t *testing.T, n int, order string, bound int) int {
	s := sizeSet{slab: new(pageSlab)}
	perm := workPerm(n, order)
	most := 0
	for i, j := range perm {
		k := freeKey{stream: 7, size: 512, addr: uint64(j) * 1024, id: blockID(j + 1)}
		most = max(most, opWork(t, "insert", i, bound, func() { s.ReplaceOrInsert(k) }))
	}
	if s.Len() != n {
		t.Fatalf("%d keys, want %d", s.Len(), n)
	}
	b := s.stream(7)
	for i, j := range perm {
		addr := uint64(j) * 1024
		most = max(most, opWork(t, "lower bound", i, bound, func() {
			c, x, ok := b.lowerBound(512, addr)
			if !ok || b.key(7, c, x).addr != addr {
				t.Fatalf("lower bound of %#x: %v %v", addr, ok, b.key(7, c, x))
			}
		}))
		most = max(most, opWork(t, "delete", i, bound, func() {
			s.Delete(freeKey{stream: 7, size: 512, addr: addr})
		}))
	}
	if s.Len() != 0 {
		t.Fatalf("%d keys left", s.Len())
	}
	return most
}

// TestWork_sizeSetClass: a million free blocks of one size (one class,
// ordered by address), as a program that keeps many small tensors and
// frees some leaves them.
func TestWork_sizeSetClass(t *testing.T) {
	for _, order := range workOrders {
		t.Run(order, func(t *testing.T) {
			m := sizeSetClassWork(t, workN, order, workBound(workN))
			t.Logf("most work of one operation: %d", m)
		})
	}
}

// TestWork_freeSet: a million unmapped ranges, inserted, found by lower
// bound and deleted.
func TestWork_freeSet(t *testing.T) {
	bound := workBound(workN)
	for _, order := range workOrders {
		t.Run(order, func(t *testing.T) {
			var s freeSet
			perm := workPerm(workN, order)
			for i, j := range perm {
				k := freeKey{stream: 3, addr: uint64(j) << 21, id: blockID(j + 1)}
				opWork(t, "insert", i, bound, func() { s.ReplaceOrInsert(k) })
			}
			for i, j := range perm {
				k := freeKey{stream: 3, addr: uint64(j) << 21}
				opWork(t, "lower bound", i, bound, func() {
					s.AscendGreaterOrEqual(k, func(f freeKey) bool {
						if f.addr != k.addr {
							t.Fatalf("lower bound of %#x: %#x", k.addr, f.addr)
						}
						return false
					})
				})
				opWork(t, "delete", i, bound, func() { s.Delete(k) })
			}
			if s.Len() != 0 || s.t.height != 0 {
				t.Fatalf("%d keys left, height %d", s.Len(), s.t.height)
			}
		})
	}
}

// streamsWork makes n streams of a sizeSet, one free block each, in the
// order given, then finds each stream (never the last one found) and
// removes its block, returning the most work one operation did.
func streamsWork(t *testing.T, n int, order string, bound int) int {
	s := sizeSet{slab: new(pageSlab)}
	perm := workPerm(n, order)
	most := 0
	st := func(j int) uint64 { return uint64(j)*0x10000 + 0x1000 }
	for i, j := range perm {
		k := freeKey{stream: st(j), size: 1 << 20, addr: uint64(j) << 21, id: blockID(j + 1)}
		most = max(most, opWork(t, "new stream", i, bound, func() { s.ReplaceOrInsert(k) }))
	}
	for i, j := range perm {
		k := freeKey{stream: st(j), size: 1 << 20, addr: uint64(j) << 21}
		s.lastB = nil // a lookup, not the last stream found
		most = max(most, opWork(t, "find stream", i, bound, func() {
			if s.stream(k.stream) == nil {
				t.Fatalf("stream %#x not found", k.stream)
			}
		}))
		s.lastB = nil
		most = max(most, opWork(t, "delete", i, bound, func() { s.Delete(k) }))
	}
	if s.Len() != 0 {
		t.Fatalf("%d keys left", s.Len())
	}
	return most
}

// TestWork_streams: 65,536 streams (a stream's bins take a few hundred
// bytes; a million would take most of the test machine's memory).
func TestWork_streams(t *testing.T) {
	const n = 1 << 16
	for _, order := range workOrders {
		t.Run(order, func(t *testing.T) {
			m := streamsWork(t, n, order, workBound(n))
			t.Logf("most work of one operation: %d", m)
		})
	}
}

// TestWork_processEvents frees a million blocks used by a second stream
// (record_stream), then completes them one by one: each completion's
// ProcessEvents must cost O(1) amortised, not a pass over the pending
// blocks. It checks the total after each completion against log2 n a
// completion so far.
func TestWork_processEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("a million blocks")
	}
	for _, order := range workOrders {
		t.Run(order, func(t *testing.T) {
			n := workN
			a, err := New(DefaultConf(), NewSimDevice(1<<40))
			if err != nil {
				t.Fatal(err)
			}
			addrs := make([]uint64, n)
			for i := range addrs {
				if addrs[i], err = a.Malloc(512, 0); err != nil {
					t.Fatal(err)
				}
				if err := a.RecordStream(addrs[i], 1); err != nil {
					t.Fatal(err)
				}
			}
			for _, x := range addrs {
				if err := a.Free(x); err != nil {
					t.Fatal(err)
				}
			}
			w := pendWork
			lg := bits.Len(uint(n))
			for i, j := range workPerm(n, order) {
				if err := a.CompleteFree(addrs[j]); err != nil {
					t.Fatal(err)
				}
				if d := pendWork - w; d > (i+1)*lg {
					t.Fatalf("%d completions read %d places of pending, more than log2 n each", i+1, d)
				}
			}
			total := pendWork - w
			if st := a.Stats(); st.Active[0].Current != 0 {
				t.Fatalf("%d blocks still active", st.Active[0].Current)
			}
			t.Logf("places read a completion: %.2f", float64(total)/float64(n))
		})
	}
}

// TestWork_flatControl checks that the measure tells the flat structures
// from the trees: the flat rest of a class (restMax unbounded) and the
// scanned list of streams (streamsFlat unbounded) pass the bound of a
// million keys with far fewer, in ascending order.
func TestWork_flatControl(t *testing.T) {
	bound := workBound(workN)
	defer func(r, s int) { restMax, streamsFlat = r, s }(restMax, streamsFlat)
	restMax, streamsFlat = math.MaxInt, math.MaxInt
	if m := sizeSetClassWork(t, 1<<13, "ascending", math.MaxInt); m <= bound {
		t.Errorf("a flat rest of %d entries did at most %d work an operation, not more than %d", 1<<13, m, bound)
	}
	if m := streamsWork(t, 1<<13, "ascending", math.MaxInt); m <= bound {
		t.Errorf("%d scanned streams did at most %d work an operation, not more than %d", 1<<13, m, bound)
	}
}

// TestWork_ascendingRuns inserts a million keys in runs of ascending keys,
// each run below the ones before (the blocks of segments freed in address
// order, the segments at descending addresses): each run's keys go in one
// after another, which kTree.insert takes from the leaf of the last
// insertion (its finger) and splits where they go on, so an insertion
// costs a few node visits and moves on average, not a search from the root
// and half a leaf moved.
func TestWork_ascendingRuns(t *testing.T) {
	const run = 1024
	var tr kTree
	w := work()
	for r := workN/run - 1; r >= 0; r-- {
		for j := range run {
			k := freeKey{size: 1024, addr: uint64(r*run+j) * 2048, id: blockID(r*run + j + 1)}
			if !tr.insert(k) {
				t.Fatalf("run %d key %d: not inserted", r, j)
			}
		}
	}
	if tr.n != workN {
		t.Fatalf("tree holds %d keys, want %d", tr.n, workN)
	}
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}
	if avg := float64(work()-w) / workN; avg > 4 {
		t.Fatalf("work %.2f per insertion, want at most 4", avg)
	}
}
