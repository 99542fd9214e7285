// Package torchsnap reads PyTorch CUDA memory snapshots into tracer events and
// allocator state: the pickles written by torch.cuda.memory._dump_snapshot
// (protocols 2 to 5), the JSON form of the same schema that MemoryViz
// accepts, and bare segment lists from torch.cuda.memory_snapshot(). The
// format is described in shared/spec/pytorch-snapshot.md.
//
//	snap, err := torchsnap.ReadFile("snapshot.pickle")
//	for _, d := range snap.Devices {
//		initial, err := d.Reconstruct(conf.RoundSize) // state before d.Events[0]
//		for _, p := range d.Validate() { log.Print(p) } // warnings, never fatal
//	}
//
// # Decoding
//
// Snapshots reach millions of trace entries and hundreds of MB, so the file
// is never turned into a generic object graph. The pickle opcode machine
// (pickle.go) executes only data opcodes and refuses class loading (GLOBAL,
// REDUCE, …): a snapshot holds builtin types only, and refusing the rest
// means a hostile file cannot make us interpret anything. Each Python object
// becomes a 16-byte value (value.go) indexing compact tables: strings are
// interned, and the builder (builder.go) converts dicts of the snapshot
// schema — trace entries, frames, blocks, segments — into Go structs as soon
// as a list or dict consumes them, recycling their generic form. A trace
// entry or frame dict filled by one SETITEMS and followed by the next dict
// or the APPENDS that takes it (how CPython writes a list of dicts) is
// converted straight from the pickle stack, never stored as a dict; when its
// items are scalars, memo references, short strings and frames lists, and
// all its bytes are buffered (nearly every trace entry), the opcodes from
// EMPTY_DICT to SETITEMS run as one step that reads the items from the
// buffer without the stack (unpickler.flatDict); a trace entry whose keys
// are memo references, "action" first (every one but a file's first few), is
// converted field by field as its items are read, without collecting them
// (flatEvent): each pair is dispatched on its key, and the value read in
// the opcode PyTorch writes for that key (action as a memo reference, addr
// and time_us LONG1, size and stream BININT*); anything else, and what
// needs a call (frames lists, short strings), goes through flatValue. That
// took decoding a real 9.6 MB snapshot from 189M to 144M instructions. Frames lists are shared objects in the pickle, so each
// becomes a stack id once, however many entries refer to it. Trace lists are
// kept as runs of consecutive events, and events live in a chunked store
// (store.go) in their final form, trace.Event. The store's chunks are cut in
// order from one allocation sized from the file (a trace entry takes about
// 80 bytes of pickle, rarely under 60; the base holds size/48, and what it
// holds beyond the events is never touched), so a device's run is normally a
// view of it, with no copy; decoding sets each event's Seq to its index in
// the store, which for the usual single device's list is already its
// position, so that nothing is set in place either. Events past the base
// (chunks then come from 20 MiB slabs backed by huge pages, which halves the
// cost of faulting them in) or in lists that are not plain runs are copied
// into each device's slice, on two cores, releasing the store a part at a
// time behind the copy. Large files are read ahead by a goroutine of their
// own (readahead.go). On 4 cores or more, ReadFile hands the rest of a large
// trace list, once its first batch is decoded, to a region (parallel.go): it
// is cut into chunks by opcode lengths, by the workers themselves (each
// walks its own, and the cuts are checked in order), workers decode the
// chunks on all cores (flatEntry converts an entry as flatEvent does), and
// the chunks are committed in order, with the result the sequential machine
// would give (TestRegions and FuzzRegions compare the two); a commit only
// maps a chunk's strings, frames, stacks and memo slots to the builder's,
// and a goroutine of the chunk's own then rewrites its events' stack ids.
// Lengths in the input never size an allocation beyond the bytes actually
// read.
//
// # Hostile input
//
// What decoding holds is bounded by the file: the machine refuses to hold
// more values on its stack, dicts, lists or list items than one per 8 bytes
// read, beyond 16k of each (unpickler.bounded), which no snapshot needs and
// which a flood of one-byte opcodes (DUP, EMPTY_DICT, ...) would otherwise
// turn into 16 to 250 bytes of memory per byte of file; a trace list named
// by two devices, a trace entry named twice and a blocks list or block held
// by two segments are refused (PyTorch never shares them), so a trace has
// at most one event per entry dict in the file. A frames list of any depth
// is kept as its stack alone (CPython writes one of over 1,000 frames in
// several APPENDS batches, which the flat path reads as one).
//
// # Spilled events
//
// Open decodes with the sequential machine into a spill (spill.go) instead
// of the store: an unlinked temporary file, in the directory the caller
// names (the import: the output's), that events are appended to,
// spillChunk (1024) at a time, as the raw bytes of 56-byte records that
// hold the fields decoding sets (srec: no pointers, and the file never
// outlives the process), by a goroutine of the spill's own while the
// decoder fills the next buffer. A device's run of events is then a
// range of the file, Device.Events is nil, and Device.Len and Device.Chunk
// read the events back a chunk at a time with pread, widened into
// trace.Events in place: Reconstruct walks the chunks backwards and
// Validate forwards, and so do the import's own passes (record/import.go),
// so that no pass holds more than a few chunks. OpenFollowed also hands
// each chunk, once written, to a function of the caller's on the spill's
// goroutine: the import derives there, as decoding goes on, what its
// passes after decoding would read the spill for, the start state above
// all (Forward: the state Reconstruct's undo derives backwards, its blocks
// derived forwards address by address, its ranges by undoing the segment
// events alone, kept as they pass, for one-device traces;
// TestForward_matchesUndo checks it against undo on every real snapshot
// cut at 0–99%). The
// file's pages are in the page cache, which is not the process's memory, as
// long as it is read and written rather than mapped. What decoding into a
// spill still holds grows with the file only through the pickle memo (5
// bytes a slot, a slot or two per trace entry) and the compact frames lists
// (4 bytes each), dropped at the end of decoding, and the tables of distinct
// strings, frames and stacks. The
// regions of the parallel decoder write into the store's chunks in place and
// are not used by Open: tracer import opens files up to 64 MB (and any file
// on fewer than 4 cores) with Open, and decodes larger ones in memory with
// ReadFileMapped when the regions would run: ReadFile with the events in
// memory mapped outside the Go heap and given back by Close, so that the
// store, sized for the most entries a file could hold, does not set the
// collector's goal (a real 95 MB snapshot's import peaked at 184–189 MiB
// with it on the heap, 167–176 MiB without). Regions writing into a spill were
// tried (four workers, 64 KB chunks, each chunk's events written at their
// place once committed): on the 16-core GPU host the 9 MB import took
// 0.041–0.047 s and 18.4–18.9 MiB, against 0.044–0.053 s and 15.9–16.3 MiB
// sequentially, because a chunk holds at least one whole batch of the
// 1,000 entries CPython writes between APPENDS, whatever its size. Tried
// again (2026-11-22, on the 16-core host) with a bounded number of chunks
// in flight, one writer goroutine putting each committed chunk's events at
// their place, and six workers: decoding the real 9.6 MB snapshot alone
// took 15–19 ms against 21–33 ms, but the import gained 12–24% on two
// machines, nothing or -19% on two busy ones, and nothing at 38 and 57 MB,
// for 3–5.5 MiB more, which put the 9.6 MB import at its 2× bound.
//
// # Wrapped histories
//
// PyTorch keeps the trace in a ring buffer; when it wraps, the allocs of
// still-live blocks and the segment_allocs of existing segments are lost.
// Device.Reconstruct (reconstruct.go) walks the trace backwards from the
// dumped segments to rebuild the state at the first retained event, as
// MemoryViz does, and emits it as leading events flagged
// trace.FlagReconstructed.
//
// # Performance
//
// Measured on the shared 2-core development machine with other work running
// (load average 1 to 5), so wall times vary run to run: the minimum and
// median of 6 to 20 runs, interleaved with python3 and with the previous
// build (2026-11-22). Decode is TestDecodeFile -decode-only (bench_test.go);
// import is `tracer import F -o OUT` (BenchmarkImport in record measures the
// same in-process). The 9 MB file is testdata/scale_snapshot.py applied to
// multistream__default__seed1 (×49; TestScaledSnapshot writes its twin, and
// BenchmarkDecode and BenchmarkAnalyze make it, from the repository), the
// 202 MB one TestSyntheticSnapshot with TORCHSNAP_GEN_EVENTS=2500000.
//
//	file                          decode only        tracer import                    python3 pickle.load
//	multistream ×49, 112k         35 ms (med 37)     66 ms (med 83), 36 MiB RSS       0.29 s (med 0.33), 57 MiB
//	  entries, 9 MB
//	generated, 2.5M entries,                         1.01 s (med 1.12), 277 MiB       7.7 s, 972 MiB
//	  202 MB
//
// The build before (flatDict collecting an entry's items, then toEvent)
// took 46 ms (med 50) to decode the 9 MB file and 76 ms (med 93), 42 MiB to
// import it, and 1.33 s (med 1.43), 283 MiB to import the 202 MB one. On 4
// cores or more, where regions decode the trace lists, the import of the
// 9 MB file takes about 43 MiB (GOMAXPROCS=16 here: the regions' chunk
// buffers and results) against 46 before. Of the memory, 12 to 17 MiB is
// the process before it reads anything (`tracer version`: the binary's
// pages, gonum/plot parsing its fonts at init, cgo; the most when the
// binary was just written; since 2026-11-22 tracer gives back the pages
// its initialization touched, internal/textpages, about 2 MiB of the
// import's peak), and 12 MiB the events in their final form.
//
// With Open (tracer import since the spill, 2026-11-22, same machine,
// binaries copied before timing, interleaved): the 9 MB file imports in
// 0.07 s (med 0.09), as before, at 16.7 MiB peak RSS (34.3 before; 17.6
// with GOMAXPROCS=16, 41 before), of which about 12 MiB is the process
// before it reads anything; the 202 MB one in 1.23 s (med 1.34; 1.13
// before) at 38.7 MiB (275 before), the pickle memo being most of the
// difference from the 9 MB file. A 52 KB snapshot peaks at 16.0 MiB (14.5
// before: the fixed buffers of the passes). On the H100 host (16 cores),
// the 9 MB file: 0.038–0.046 s and 15.7–16.3 MiB, against 0.025–0.030 s
// and 38–41 MiB with the regions in memory, python3's pickle.load
// 0.14–0.32 s (testdata/gpu/ab.sh).
//
// Real snapshots (testdata/bench/real_snapshot.py: a training run, python
// stacks) differ from the files above in one way that matters: most trace
// entries bring a frames list of their own (the files above share one list
// between many entries). The decoder kept each as a listObj with its items
// until the end of decoding, which made a real 9.6 MB snapshot's import
// peak at 31–34 MiB and a real 190 MB one's at 834 MiB on the GPU host.
// A trace entry's frames list is now a compact list (listStore): its stack
// alone, 4 bytes, made when the entry converts; a listObj, derived from the
// stack, is made for it only if the pickle uses the list again as a value
// (TestDerivedFrames); a region's worker keeps no frames for a list whose
// stack it has already made. With the memo's slots at 5 bytes (memo.wide
// holds what does not fit) and the import decoding a file in memory at
// GOGC=25, the same imports peak at 16.2–16.6 MiB and 343–346 MiB
// (2026-11-22, testdata/bench/maxrss.c).
//
// Such a list is new as an object but not in what it holds: its items are
// memo references to frame dicts pickled once, and the real 9.6 MB
// snapshot's 29k non-empty trace frames lists hold 3,600 distinct runs of
// references for 38 stacks (CPython makes a frame dict anew at times). The
// sequential machine looks the run's bytes up in a direct-mapped cache of
// 1,024 runs (knownSpan) before resolving any reference; a hit is the
// stack the same bytes made before, with no memo lookup and no interning:
// 358M -> 315M instructions to decode that file (cachegrind). A memo slot
// stored again with anything but a dict's conversion (BINPUT of an index
// used before, which no CPython pickle does) drops the cache, since the
// same bytes would then name other frames (TestSpanCache).
//
// Of an import of the 202 MB file, decoding is about half; then
// Reconstruct (one backward walk, which also finds lost allocs; Validate
// reuses its start state) takes about 0.1 s, and the Arrow writer about
// 0.2 s, with validation beside it on the other core. Faulting memory in
// costs about a millisecond per MiB on this machine, a third of what
// decoding a MiB of pickle takes: the writer lays a batch out on several
// goroutines, into columns it does not clear first, and the read-ahead and
// output windows are 1 MiB each.
package torchsnap
