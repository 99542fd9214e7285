package record

import (
	"cmp"
	"context"
	mbits "math/bits"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// findEmptyCaches decides which of d's recorded segment_free/segment_unmap
// runs were torch.cuda.empty_cache() calls, which PyTorch's history does
// not record: a replay of the recording under its own settings on the
// allocator model attributes each run to the malloc after it when the model
// says that malloc would have released cached memory, and to an
// empty_cache() call otherwise (replay's settle, exact while the model
// follows the recording). It returns one KindEmptyCache event per call, in
// order, with Seq the index among d's events of the run's first release
// (the row goes before it), its time and stack, and Size the bytes the run
// released. lastRelease is the index of d's last release: the replay ends
// at the first request after it, which settles it.
//
// The import writes these rows into the trace, so that a replay under any
// settings makes the requests the program made, rather than inferring them
// again from releases that the new settings would not repeat.
//
// inference says what else the replay infers. pools has it infer private
// pools as the annotation does
// (annotateBlockSizes): a run of releases that frees a pool's segments
// releases that pool first, without which the model would keep the
// segments the recording gave back and decide the later runs on a state
// the recording did not have. The inference writes into the events, so the
// chunks are then copies, never views of the snapshot's events. flips are
// replay.Options.PoolFlips; end says where the model left the recording,
// if it did, and how many pools it invented (none without pools).
// oomEmpties is replay.Options.EmptyCacheAfterOOM. A pass that invented
// a pool for a capture's first allocation, whose capture went on in a pool
// the dump names (replay.DeviceResult.Aliases), is made again with that
// pool; private keeps the aliases for every later pass, the annotation's
// too. (A device that released nothing has no such pass, and keeps the
// invented pool.)
func findEmptyCaches(conf allocator.Conf, infer inference, limit, total int64, initial []trace.Event, d *torchsnap.Device, lastRelease int64,
	private *privatePools, flips map[replay.AllocKey]bool) ([]trace.Event, passEnd, error) {
	var rows []trace.Event
	var end passEnd
	inferPools := infer.pools
	src := &chunkSource{initial: initial, d: d, private: private, lastRelease: lastRelease, copy: inferPools}
	res, err := replay.Run(context.Background(), src, replay.Options{Conf: conf, MemoryLimit: limit, TotalMemory: total, Recorded: true,
		SkipCompare: true, Annotate: inferPools, InferPools: inferPools, EmptyCacheAfterOOM: infer.oomEmpties, PoolFlips: flips, PoolAliases: private.poolAliases(), NamedPools: private.ids(), LeftAt: func(_ *trace.Event, addr uint64) {
			end.addr = addr
		}, Left: func(ev *trace.Event) {
			end.left, end.ev = true, *ev
		}, EmptyCacheFound: func(first *trace.Event, released int64) {
			rows = append(rows, trace.Event{Seq: first.Seq, TimeUs: first.TimeUs, Device: d.Index,
				Kind: trace.KindEmptyCache, Size: released, Stack: first.Stack})
		}}, nil)
	if err == nil {
		err = src.err
	}
	if err == nil && private.alias(res) {
		// The pass invented a pool for a capture's first allocation
		// that the capture's later ones name: again, with that pool.
		return findEmptyCaches(conf, infer, limit, total, initial, d, lastRelease, private, flips)
	}
	if err == nil {
		for _, dr := range res.Devices {
			end.pools += dr.InferredPools
			end.fresh = append(end.fresh, dr.Fresh...)
			if !src.done && !end.left && dr.Allocator != nil {
				end.misplaced = misplaced(d, dr.Allocator.Segments())
			}
		}
	}
	return rows, end, err
}

// inference is what findEmptyCaches infers besides the empty_cache() calls
// that released memory: the private pools (the recording's own settings
// are known), and the calls that followed OOMs (the user says the program
// makes them: ImportOptions.EmptyCacheAfterOOM).
type inference struct{ pools, oomEmpties bool }

// misplaced returns, for each segment d's dump says is the default pools',
// the private pool of the model's final segments segs that holds it, if
// any: the inference took the default pools for that private pool. The
// model's segments never overlap, so the one holding an address is found
// by a binary search over the private ones sorted by address (a scan of
// them all for each dumped segment was quadratic).
func misplaced(d *torchsnap.Device, segs []allocator.SegmentInfo) []allocator.PoolID {
	var priv []allocator.SegmentInfo
	for _, s := range segs {
		if !s.Pool.IsDefault() {
			priv = append(priv, s)
		}
	}
	slices.SortFunc(priv, func(a, b allocator.SegmentInfo) int { return cmp.Compare(a.Addr, b.Addr) })
	var out []allocator.PoolID
	for _, ds := range d.Segments {
		if !ds.Pool.IsDefault() {
			continue
		}
		// The last private segment starting at or below the address.
		i := sort.Search(len(priv), func(i int) bool {
			if countScans {
				scanWork.Add(1)
			}
			return priv[i].Addr > ds.Addr
		})
		if i > 0 {
			if s := &priv[i-1]; ds.Addr < s.Addr+uint64(s.Size) {
				out = append(out, s.Pool)
			}
		}
	}
	return out
}

// scanWork counts the entries misplaced and sandwiched examine while
// countScans is set, for the tests that bound their work (atomic: imports
// decide devices in parallel).
var (
	countScans bool
	scanWork   atomic.Int64
)

// chunkSource is findEmptyCaches' replay source (a replay.BatchSource):
// the reconstructed events, then d's events a chunk at a time, tagged with
// their private pools, up to the chunk that holds the first request after
// lastRelease: no attribution is made after it.
type chunkSource struct {
	initial     []trace.Event
	d           *torchsnap.Device
	private     *privatePools
	lastRelease int64
	copy        bool // hand out copies of the chunks (findEmptyCaches)
	buf         []trace.Event
	lo          int64
	served      bool
	done        bool
	err         error
}

// NextBatch hands out initial, then d's chunks in order.
func (s *chunkSource) NextBatch() []trace.Event {
	if !s.served {
		s.served = true
		if len(s.initial) > 0 {
			return s.initial
		}
	}
	n := s.d.Len()
	if s.lo >= n || s.err != nil || s.done {
		return nil
	}
	if s.buf == nil {
		s.buf = make([]trace.Event, torchsnap.ChunkSize)
	}
	hi := min(n, s.lo+torchsnap.ChunkSize)
	evs, err := s.d.Chunk(s.lo, hi, s.buf)
	if err != nil {
		s.err = err
		return nil
	}
	if s.copy && len(evs) > 0 && &evs[0] != &s.buf[0] {
		evs = s.buf[:copy(s.buf, evs)]
	}
	tagPools(evs, s.private)
	for i := max(0, s.lastRelease+1-s.lo); i < int64(len(evs)) && !s.done; i++ {
		switch evs[i].Kind {
		case trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted, trace.KindOOM:
			s.done = true // the replay settles the last release here
		}
	}
	s.lo = hi
	return evs
}

// Next and Event make chunkSource a replay.Source; replay.Run, which uses
// NextBatch when a source has it, never calls them.
func (s *chunkSource) Next() bool          { panic("record: chunkSource is a batch source") }
func (s *chunkSource) Event() *trace.Event { panic("record: chunkSource is a batch source") }
func (s *chunkSource) Err() error          { return s.err }

// withRows returns evs, events [lo, lo+len(evs)) of a device whose
// empty_cache rows are rows (findEmptyCaches), with the rows that go before
// them inserted and every Seq made the index in the device's output, rows
// included; before is the number of rows before lo. evs is changed in
// place when it lies in buf and takes no row; otherwise the events are
// copied, into buf if evs is not there (a view of a snapshot in memory,
// which validation reads meanwhile) and buf is long enough.
func withRows(evs, buf []trace.Event, lo int64, rows []trace.Event, before int) []trace.Event {
	hi := lo + int64(len(evs))
	k := before
	for k < len(rows) && rows[k].Seq < hi {
		k++
	}
	if k == 0 {
		return evs // no row before or among them: nothing moves
	}
	owned := len(evs) > 0 && len(buf) > 0 && &evs[0] == &buf[0]
	if k == before && owned {
		for i := range evs {
			evs[i].Seq = lo + int64(i) + int64(before)
		}
		return evs
	}
	n := len(evs) + k - before
	var out []trace.Event
	if !owned && cap(buf) >= n {
		out = buf[:0]
	} else {
		out = make([]trace.Event, 0, n)
	}
	r := before
	for i := range evs {
		for r < k && rows[r].Seq == lo+int64(i) {
			row := rows[r]
			row.Seq += int64(r)
			out = append(out, row)
			r++
		}
		e := evs[i]
		e.Seq = lo + int64(i) + int64(r)
		out = append(out, e)
	}
	return out
}

// withTrailingRows appends to evs, a device's last chunk of n events with
// its rows from index start on inserted (withRows), the rows that go after
// the device's last event (a call that released nothing, decidePools),
// their Seq made the index in the device's output.
func withTrailingRows(evs, rows []trace.Event, start int, n int64) []trace.Event {
	for r := start; r < len(rows); r++ {
		if rows[r].Seq >= n {
			row := rows[r]
			row.Seq += int64(r)
			evs = append(evs, row)
		}
	}
	return evs
}

// batchNulls returns how many events of each batch of the output have no
// stack: total events, each device's initial ones (noted in their Stack),
// then its recorded ones (a bit set in noStack[i]) with its empty_cache
// rows among them (each has the stack of the release it precedes).
func batchNulls(total int64, initial [][]trace.Event, devs []*torchsnap.Device, noStack [][]uint64, rows [][]trace.Event) []int {
	nulls := make([]int, (total+trace.DefaultBatchRows-1)/trace.DefaultBatchRows)
	var row int64
	for i, d := range devs {
		for j := range initial[i] {
			if initial[i][j].Stack == trace.NoStack {
				nulls[(row+int64(j))/trace.DefaultBatchRows]++
			}
		}
		row += int64(len(initial[i]))
		// The recorded events [k, end) follow at row+k.
		span := func(k, end int64) {
			for k < end {
				// The recorded events [k, hi) fall in one batch.
				hi := min(end, k+trace.DefaultBatchRows-(row+k)%trace.DefaultBatchRows)
				nulls[(row+k)/trace.DefaultBatchRows] += countBits(noStack[i], k, hi)
				k = hi
			}
		}
		var k int64
		if i < len(rows) {
			for _, r := range rows[i] {
				span(k, r.Seq)
				k = r.Seq
				if r.Stack == trace.NoStack {
					nulls[(row+k)/trace.DefaultBatchRows]++
				}
				row++
			}
		}
		span(k, d.Len())
		row += d.Len()
	}
	return nulls
}

// countBits returns the number of bits set in bits[lo, hi).
func countBits(bits []uint64, lo, hi int64) int {
	n := 0
	for ; lo < hi && lo%64 != 0; lo++ {
		n += int(bits[lo/64] >> (lo % 64) & 1)
	}
	for ; lo+64 <= hi; lo += 64 {
		n += mbits.OnesCount64(bits[lo/64])
	}
	for ; lo < hi; lo++ {
		n += int(bits[lo/64] >> (lo % 64) & 1)
	}
	return n
}
