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
// interned, and the builder (builder.go) converts dicts of the snapshot schema
// — trace entries, frames, blocks, segments — into Go structs as soon as a
// list or dict consumes them, recycling their generic form. A trace entry or
// frame dict filled by one SETITEMS and followed by the next dict or the
// APPENDS that takes it (how CPython writes a list of dicts) is converted
// straight from the pickle stack, never stored as a dict; when its items
// are scalars, memo references, short strings and frames lists, and all
// its bytes are buffered (nearly every trace entry), the opcodes from
// EMPTY_DICT to SETITEMS run as one step that reads the items from the
// buffer without the stack (unpickler.flatDict). Frames lists are
// shared objects in the pickle, so each becomes a stack id once, however
// many entries refer to it. Trace lists are kept as runs of consecutive
// events, and events live in a chunked store (store.go) in their final
// form, trace.Event. The store's chunks are cut in order from one
// allocation sized from the file (a trace entry takes about 80 bytes of
// pickle, rarely under 60; the base holds size/48, and what it holds beyond
// the events is never touched), so a device's run is normally a view of it: its Events
// get their Seq and Device in place, with no copy. Events past the base
// (chunks then come from 20 MiB slabs backed by huge pages, which halves
// the cost of faulting them in) or in lists that are not plain runs are
// copied into each device's slice, on two cores, releasing the store a
// part at a time behind the copy. Large files are read ahead by a goroutine
// of their own (readahead.go). On 4 cores or more, ReadFile hands the rest
// of a large trace list, once its first batch is decoded, to a region
// (parallel.go): it is cut into chunks by opcode lengths, by the workers
// themselves (each walks its own, and the cuts are checked in order),
// workers decode the chunks on all cores, and the chunks are committed in order,
// with the result the sequential machine would give (TestRegions and
// FuzzRegions compare the two). Lengths in the input never size an allocation
// beyond the bytes actually read.
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
// (load average 2 to 5), so wall times vary run to run: the range of 5 to 8
// runs, interleaved with python3 and with the previous build in the same
// session (2026-11-21; the 9 MB row is from an earlier session, before
// flatDict). Decode is TestDecodeFile -decode-only (bench_test.go); import
// is `tracer import F -o OUT` (BenchmarkImport in record measures the same
// in-process), whose wall time includes syncing the output, which stalls
// at times on this machine's disk. The 9 MB file is testdata/scale_snapshot.py
// applied to multistream__default__seed1, the 202 MB one
// TestSyntheticSnapshot with TORCHSNAP_GEN_EVENTS=2500000.
//
//	file                          decode only                 tracer import               python3 pickle.load
//	generated, 2.5M entries,      0.57–0.86 s, 284 MiB RSS    1.2–2.2 s, 306–308 MiB      5.4–8.3 s, 972 MiB
//	  202 MB                                                  (one run 6.2 s: sync)
//	multistream ×48, 112k         0.05–0.07 s, 31 MiB         0.10–0.13 s, 55 MiB         0.21–0.27 s, 57 MiB
//	  entries, 9 MB
//
// flatDict took decoding of the 202 MB file from 0.75–1.07 s (median 0.90)
// to 0.57–0.86 s (median 0.74) in the same session, CPU time alike; the
// import's CPU time (user+sys) from 1.45–1.77 s to 1.42–1.51 s.
//
// Of an import of the 202 MB file, decoding is about half; then
// Reconstruct (one backward walk, with the forward check for lost allocs
// beside it; Validate reuses its start state) takes about 0.1 s, and the Arrow
// writer about 0.2 s, with validation beside it on the other core.
package torchsnap
