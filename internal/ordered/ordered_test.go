package ordered

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestOrderedLogarithmic: each floor, remove and insert among 2^16 keys
// steps through O(log n) nodes and entries.
func TestOrderedLogarithmic(t *testing.T) {
	const n = 1 << 16
	var o Map[int64, int]
	rng := rand.New(rand.NewPCG(5, 6))
	keys := rng.Perm(n)
	for _, k := range keys {
		o.Insert(int64(k)*2, k)
	}
	limit := 4 * bits.Len(n)
	for i := range 1000 {
		o.Visits = 0
		k := int64(keys[i]) * 2
		if f, _, ok := o.Floor(k + 1); !ok || f != k {
			t.Fatalf("floor(%d) = %d %v, want %d", k+1, f, ok, k)
		}
		o.Remove(k)
		o.Insert(k, 0)
		if o.Visits > 3*limit {
			t.Fatalf("floor, remove and insert of one key among %d touched %d nodes, want at most %d", n, o.Visits, 3*limit)
		}
	}
}

// TestOrderedShrinks: removing all but a few of 2^16 keys, in ascending,
// descending and random order, leaves a tree as low as the keys need,
// and the searches still right.
func TestOrderedShrinks(t *testing.T) {
	const n = 1 << 16
	rng := rand.New(rand.NewPCG(1, 2))
	orders := map[string][]int{"ascending": make([]int, n), "descending": make([]int, n), "random": rng.Perm(n)}
	for i := range n {
		orders["ascending"][i], orders["descending"][i] = i, n-1-i
	}
	for name, order := range orders {
		var o Map[int, int]
		for _, k := range order {
			o.Insert(k, -k)
		}
		for _, k := range order[:n-3] {
			if v, ok := o.Remove(k); !ok || v != -k {
				t.Fatalf("%s: remove(%d) = %d %v", name, k, v, ok)
			}
		}
		if o.height != 0 || o.Len() != 3 {
			t.Fatalf("%s: %d keys left in %d levels, want 3 in a leaf", name, o.Len(), o.height)
		}
		left := slices.Sorted(slices.Values(order[n-3:]))
		var got []int
		o.Each(func(k, v int) { got = append(got, k) })
		if !slices.Equal(got, left) {
			t.Fatalf("%s: keys %v, want %v", name, got, left)
		}
	}
}

// model is the Map's definition: a sorted slice of keys and their values.
type model struct{ keys, vals []int16 }

// floor returns the index of k's floor in m.keys.
func (m *model) floor(k int16) (int, bool) {
	i := len(m.keys)
	if k < math.MaxInt16 {
		i, _ = slices.BinarySearch(m.keys, k+1)
	}
	return i - 1, i > 0
}

func (m *model) insert(k, v int16) {
	i, found := slices.BinarySearch(m.keys, k)
	if found {
		m.vals[i] = v
	} else {
		m.keys, m.vals = slices.Insert(m.keys, i, k), slices.Insert(m.vals, i, v)
	}
}

func (m *model) remove(k int16) (int16, bool) {
	i, found := slices.BinarySearch(m.keys, k)
	if !found {
		return 0, false
	}
	v := m.vals[i]
	m.keys, m.vals = slices.Delete(m.keys, i, i+1), slices.Delete(m.vals, i, i+1)
	return v, true
}

// FuzzMap drives a Map and a sorted slice with the same operations and
// compares every answer. Each operation is two bytes: the low three bits
// of the first choose it, the rest make a key among 8,192; the runs of 64
// keys inserted or removed at once grow and shrink the tree through
// three levels within a short input, so that leaves and inner nodes
// split, merge and lend. The corpus is testdata/fuzz/FuzzMap.
func FuzzMap(f *testing.F) {
	f.Fuzz(checkOps)
}

// checkOps runs ops (see FuzzMap) on a Map and a model.
func checkOps(t *testing.T, ops []byte) {
	ops = ops[:min(len(ops), 1<<14)] // the fuzzer's longest inputs, too slow to run often
	var o Map[int16, int16]
	var m model
	for j := 0; j+1 < len(ops); j += 2 {
		op, k := ops[j]&7, int16(ops[j+1])<<5|int16(ops[j]>>3)-4096
		v, step := int16(j), strconv.Itoa(j/2)
		switch op {
		case 0: // insert (or set)
			o.Insert(k, v)
			m.insert(k, v)
		case 1: // insert a run
			for i := range int16(64) {
				o.Insert(k+i, v)
				m.insert(k+i, v)
			}
		case 2, 3: // remove one, or a run downwards
			for i := range int16(1 + 63*int16(op-2)) {
				got, ok := o.Remove(k - i)
				want, found := m.remove(k - i)
				if ok != found || got != want {
					t.Fatalf("step %s: remove(%d) = %d %v, want %d %v", step, k-i, got, ok, want, found)
				}
			}
		case 4: // floor and get
			gk, gv, ok := o.Floor(k)
			i, want := m.floor(k)
			if ok != want || ok && (gk != m.keys[i] || gv != m.vals[i]) {
				t.Fatalf("step %s: floor(%d) = %d %d %v, want found %v", step, k, gk, gv, ok, want)
			}
			got, ok := o.Get(k)
			i, found := slices.BinarySearch(m.keys, k)
			if ok != found || found && got != m.vals[i] {
				t.Fatalf("step %s: get(%d) = %d %v, want found %v", step, k, got, ok, found)
			}
		case 5: // ceil
			gk, gv, ok := o.Ceil(k)
			i, _ := slices.BinarySearch(m.keys, k)
			if ok != (i < len(m.keys)) || ok && (gk != m.keys[i] || gv != m.vals[i]) {
				t.Fatalf("step %s: ceil(%d) = %d %d %v, want found %v", step, k, gk, gv, ok, i < len(m.keys))
			}
		case 6: // ascend from k, at most 40 keys
			i, ok := m.floor(k)
			if !ok {
				i = 0
			}
			var got []int16
			o.Ascend(k, func(key, val int16) bool {
				if val != m.vals[i+len(got)] {
					t.Fatalf("step %s: ascend(%d) gave %d=%d, want %d", step, k, key, val, m.vals[i+len(got)])
				}
				got = append(got, key)
				return len(got) < 40
			})
			if want := m.keys[i:min(i+40, len(m.keys))]; !slices.Equal(got, want) {
				t.Fatalf("step %s: ascend(%d) = %v, want %v", step, k, got, want)
			}
		case 7: // remove a run upwards
			for i := range int16(64) {
				got, ok := o.Remove(k + i)
				want, found := m.remove(k + i)
				if ok != found || got != want {
					t.Fatalf("step %s: remove(%d) = %d %v, want %d %v", step, k+i, got, ok, want, found)
				}
			}
		}
		if o.Len() != len(m.keys) {
			t.Fatalf("step %s: %d keys, want %d", step, o.Len(), len(m.keys))
		}
	}
	var keys []int16
	o.Each(func(k, _ int16) { keys = append(keys, k) })
	if !slices.Equal(keys, m.keys) {
		t.Fatalf("keys %v, want %v", keys, m.keys)
	}
}

// benchSizes are n, 2n, 4n and 8n, 1M keys at 8n.
var benchSizes = []int{1 << 17, 1 << 18, 1 << 19, 1 << 20}

// BenchmarkMap times one floor, remove and insert of a random key among
// n keys 8 bytes apart (the segments' use: addresses, a lookup, one
// freed and one made), at each size.
func BenchmarkMap(b *testing.B) {
	for _, n := range benchSizes {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			o, keys := benchMap(n)
			rng := rand.New(rand.NewPCG(9, 10))
			b.ResetTimer()
			for range b.N {
				k := keys[rng.IntN(n)]
				if _, _, ok := o.Floor(k + 3); !ok {
					b.Fatal("no floor")
				}
				v, _ := o.Remove(k)
				o.Insert(k, v)
			}
		})
	}
}

// BenchmarkMapGrowth makes n keys in random order and then floors,
// removes and inserts each once, at n, 2n, 4n and 8n, and reports the
// time's growth exponent from 4n to 8n (1 is linear; n log n is about
// 1.05 here) and the time per insertion or round at each size.
func BenchmarkMapGrowth(b *testing.B) {
	times := make([]time.Duration, len(benchSizes))
	for range b.N {
		for i, n := range benchSizes {
			start := time.Now()
			o, keys := benchMap(n)
			for _, k := range keys {
				o.Floor(k + 3)
				v, _ := o.Remove(k)
				o.Insert(k, v)
			}
			times[i] += time.Since(start)
		}
	}
	// The last doubling's exponent, as testdata/bench/growth reports it.
	b.ReportMetric(math.Log2(float64(times[3])/float64(times[2])), "growth-exp")
	for i, n := range benchSizes {
		b.ReportMetric(float64(times[i])/float64(b.N)/float64(2*n), "ns/op-at-"+strconv.Itoa(n))
	}
}

// benchMap returns a Map of n keys inserted in a fixed random order, and
// that order.
func benchMap(n int) (*Map[uint64, int], []uint64) {
	rng := rand.New(rand.NewPCG(7, 8))
	keys := make([]uint64, n)
	for i, p := range rng.Perm(n) {
		keys[i] = uint64(p) << 3
	}
	o := &Map[uint64, int]{}
	for i, k := range keys {
		o.Insert(k, i)
	}
	return o, keys
}
