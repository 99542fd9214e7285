package analysis

import (
	"math"
	"math/bits"
)

// Lifetimes is the distribution of allocation lifetimes: from alloc to the
// caller's free (free_requested), in microseconds when the trace has
// timestamps, else in events. Blocks allocated before the trace started
// (reconstructed) or still live at its end have no lifetime and are counted
// apart.
type Lifetimes struct {
	Unit  string `json:"unit"` // "us" or "events"
	Count int64  `json:"count"`
	// Quantiles are lower bounds of histogram buckets with a relative width
	// of 1/32 (exact below 64); Max is exact.
	P50 int64 `json:"p50"`
	P90 int64 `json:"p90"`
	P99 int64 `json:"p99"`
	Max int64 `json:"max"`
	// Buckets split the lifetimes by decade: [0,10), [10,100), … and a last
	// open bucket, with the count and block bytes of each.
	Buckets []LifetimeBucket `json:"buckets"`
	// LiveAtEnd counts blocks still allocated when the trace ended.
	LiveAtEnd      int64 `json:"live_at_end"`
	LiveAtEndBytes Bytes `json:"live_at_end_bytes"`
	// Reconstructed counts frees of blocks that existed before the trace.
	Reconstructed int64 `json:"reconstructed"`
}

// LifetimeBucket is one decade of Lifetimes.
type LifetimeBucket struct {
	Below int64 `json:"below"` // exclusive upper bound; 0 for the last, open bucket
	Count int64 `json:"count"`
	Bytes Bytes `json:"bytes"`
}

const (
	histExact   = 64 // values below are their own bucket
	histSub     = 32 // buckets per octave above
	histBuckets = histExact + 58*histSub
	decades     = 8
)

// histogram is a log-linear histogram (HDR-style) of non-negative values:
// fixed size, one increment per value.
type histogram struct {
	n     [histBuckets]int64
	count int64
	max   int64
	decN  [decades]int64
	decB  [decades]int64
}

func histIndex(v int64) int {
	if v < histExact {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - 6 // mantissa keeps 6 bits: [32, 63]
	m := int(v>>shift) - histSub
	return histExact + (shift-1)*histSub + m
}

func histLower(i int) int64 {
	if i < histExact {
		return int64(i)
	}
	shift := (i-histExact)/histSub + 1
	m := int64((i-histExact)%histSub + histSub)
	return m << shift
}

func (h *histogram) add(v, bytes int64) {
	if v < 0 {
		v = 0
	}
	h.n[histIndex(v)]++
	h.count++
	if v > h.max {
		h.max = v
	}
	d, lim := 0, int64(10)
	for d < decades-1 && v >= lim {
		d++
		lim *= 10
	}
	h.decN[d]++
	h.decB[d] += bytes
}

func (h *histogram) quantile(q float64) int64 {
	if h.count == 0 {
		return 0
	}
	// Nearest rank: the smallest value with at least q·count values at or below it.
	rank := max(int64(math.Ceil(q*float64(h.count))), 1)
	var c int64
	for i, n := range h.n {
		c += n
		if c >= rank {
			return min(histLower(i), h.max)
		}
	}
	return h.max
}

func (h *histogram) result(unit string) Lifetimes {
	l := Lifetimes{Unit: unit, Count: h.count, Max: h.max,
		P50: h.quantile(0.50), P90: h.quantile(0.90), P99: h.quantile(0.99)}
	lim := int64(10)
	for d := 0; d < decades; d++ {
		b := LifetimeBucket{Below: lim, Count: h.decN[d], Bytes: Bytes(h.decB[d])}
		if d == decades-1 {
			b.Below = 0
		}
		l.Buckets = append(l.Buckets, b)
		lim *= 10
	}
	return l
}
