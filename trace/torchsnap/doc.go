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
// list or dict consumes them, recycling their generic form. Frames lists are
// shared objects in the pickle, so each becomes a stack id once, however
// many entries refer to it. Trace lists are kept as runs of consecutive
// events, and events live in a chunked store (store.go) until they are
// copied once into each device's slice. Lengths in the input never size an
// allocation beyond the bytes actually read.
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
// Measured on the shared 2-core development machine (load average 3 to 8, so
// wall times vary run to run; best and worst of several runs). Commands are in
// bench_test.go (TestDecodeFile, BenchmarkDecode) and testdata/scale_snapshot.py:
//
//	file                                  ours, decode only              python3 pickle.load
//	generated, 2.5M entries, 202 MB       0.88–1.5 s, 365 MB max RSS     5.4–6.7 s, 996 MB max RSS
//	multistream ×48, 112k entries, 9 MB   0.06–0.09 s, 27 MB max RSS     0.25–0.35 s, 59 MB max RSS
//
// Reconstruct and Validate add about 0.25 s and 0.5 s for 2.5M events.
package torchsnap
