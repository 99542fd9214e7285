package main

import (
	"fmt"
	"strings"
)

// An axis is one input shape of issue 22 at a size n: a workload for
// `tracer record --workload` (recorded on the simulated device) or a JSON
// snapshot for `tracer import`. The trace either gives is then the input of
// replay, analyze, plot and info.
type axis struct {
	name string
	// base is n: the sizes timed are n, 2n, 4n and 8n. It is large enough
	// that the replay at n takes a tenth of a second or more of CPU on the
	// 2-core development VM: below that a doubling's exponent is noise.
	// (streams stays smaller, as it was when record took workload files of
	// at most 1 MiB; the limit is 8 MiB now, which -scale 4 of every
	// workload axis stays under.)
	base int
	conf string // record's --conf (workload axes)
	// workload or snapshot returns the input at n (one of them is set).
	workload func(n int) string
	snapshot func(n int) string
}

const mib = 1 << 20

var axes = []axis{
	{name: "one-size-512B", base: 40000, workload: oneSize("512")},
	{name: "one-size-2MiB", base: 20000, workload: oneSize("2MiB")},
	{name: "one-size-1MiB-expandable", base: 20000, conf: "expandable_segments:True", workload: oneSize("1MiB")},
	{name: "20MiB-freed-empty-cache-expandable", base: 8000, conf: "expandable_segments:True", workload: emptyCache(false)},
	{name: "expandable-free-half-refill", base: 8000, conf: "expandable_segments:True", workload: emptyCache(true)},
	{name: "cross-stream-frees", base: 40000, workload: crossStream},
	{name: "streams", base: 1500, workload: streams},
	{name: "sizes-growing-past-largest-free", base: 4000, workload: growingSizes},
	{name: "plateaus", base: 40000, workload: plateaus},
	{name: "segment-churn", base: 8000, workload: segmentChurn},
	{name: "workload-frees", base: 40000, workload: frees},
	{name: "few-live-churn", base: 200000, workload: fewLive},
	{name: "snapshot-private-pools", base: 8000, snapshot: privatePools},
	{name: "snapshot-wrapped-history", base: 4000, snapshot: wrapped},
	{name: "snapshot-segment-churn", base: 4000, snapshot: snapChurn},
	{name: "snapshot-cross-stream", base: 40000, snapshot: snapCrossStream},
}

// oneSize: 2n blocks of one size, every other one freed in ascending
// address order, taken back by best fit, then all freed.
func oneSize(size string) func(n int) string {
	return func(n int) string {
		return fmt.Sprintf("alloc b %s count=%d\nfree b from=1 step=2\nalloc c %s count=%d\nfree b\nfree c\n",
			size, 2*n, size, n)
	}
}

// emptyCache: n 20 MiB blocks (expandable: one segment's ranges), every
// other one freed, empty_cache (the ranges unmapped around the live ones);
// with refill, the freed half allocated again (the ranges mapped back).
func emptyCache(refill bool) func(n int) string {
	return func(n int) string {
		w := fmt.Sprintf("alloc s 20MiB count=%d\nfree s from=1 step=2\nempty_cache\n", n)
		if refill {
			w += fmt.Sprintf("alloc r 20MiB count=%d\n", n/2)
		}
		return w
	}
}

// crossStream: n blocks used on a second stream (record_stream), freed,
// their frees completed by a sync at the next alloc.
func crossStream(n int) string {
	return fmt.Sprintf("alloc x 512 count=%d\nrecord_stream x stream=1\nfree x\nsync\nalloc y 512\nfree y\n", n)
}

// streams: a block on each of n streams, then freed and allocated again on
// each stream in turn, 4 times.
func streams(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "alloc s%d 512 stream=%d\n", i, i+1)
	}
	b.WriteString("repeat 4\n")
	for i := range n {
		fmt.Fprintf(&b, "  free s%d\n  alloc s%d 512 stream=%d\n", i, i, i+1)
	}
	b.WriteString("end\n")
	return b.String()
}

// growingSizes: 2n small blocks with every other one freed (n holes), then
// n requests of growing sizes, each larger than any free block.
func growingSizes(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "alloc h 512 count=%d\nfree h from=1 step=2\n", 2*n)
	for j := range n {
		fmt.Fprintf(&b, "alloc g%d %d\n", j, 2*mib+(j+1)*512)
	}
	return b.String()
}

// plateaus: n blocks of 512 B, then n rounds of a 1 KiB block allocated
// and the oldest 512 B one freed: a new peak every round, a free between.
func plateaus(n int) string {
	return fmt.Sprintf("alloc a 512 count=%d\nrepeat %d\n  alloc b 1KiB\n  free a count=1\nend\n", n, n)
}

// segmentChurn: n segments live, then n segments allocated, freed and
// released (empty_cache) one at a time.
func segmentChurn(n int) string {
	return fmt.Sprintf("alloc keep 12MiB count=%d\nrepeat %d\n  alloc t 12MiB\n  free t\n  empty_cache\nend\n", n, n)
}

// frees: n long-lived buffers in a group, then n rounds of one more
// buffer freed at once (`free t from=-1`).
func frees(n int) string {
	return fmt.Sprintf("alloc t 512 count=%d\nrepeat %d\n  alloc t 512\n  free t from=-1\nend\n", n, n)
}

// fewLive: 1,000 blocks live throughout, then n rounds of a block
// allocated and freed: events grow with n, live blocks do not, so a
// command's memory should not (-rss). Its trace, 85 bytes an event, is
// past the 16 MiB from which tracer replay prepares its model's memory
// from the file's size.
func fewLive(n int) string {
	return fmt.Sprintf("alloc keep 512 count=1000\nrepeat %d\n  alloc t 512\n  free t\nend\n", n)
}
