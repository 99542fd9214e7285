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
// is never turned into a generic object graph. The pickle machine (pickle.go)
// executes only data opcodes and refuses class loading (GLOBAL, REDUCE, …):
// a snapshot holds builtin types only, and refusing the rest means a hostile
// file cannot make us interpret anything. Each Python object becomes a
// 16-byte value (value.go) indexing compact tables; strings are interned.
// The builder (builder.go, convert.go) converts the dicts of the snapshot
// schema (trace entries, frames, blocks, segments) into Go structs as soon
// as a list or dict takes them, and recycles their generic form.
//
// Trace entries are almost all of a snapshot, so they take shorter paths
// (flat.go): a dict filled by one SETITEMS whose bytes are buffered is
// converted in one step from the buffer, without the stack, and an entry
// whose keys are memo references is converted field by field as its items
// are read. Frames lists are shared objects in the pickle, so each becomes
// a stack id once; a cache of recent lists' bytes (spancache.go) finds the
// stack of a list with the same references without resolving them. The
// segments' blocks come before the trace, which regions decode (below), so
// a batch of block dicts whose keys, states and frames are all references
// takes a path of its own (flatblock.go): read whole, then converted as
// APPENDS would convert them. On 4 cores or more, workers read the batches
// of a large file ahead of the machine (blockahead.go), which checks each
// and converts it in order.
//
// Events live in a chunked store (store.go) in their final form,
// trace.Event, cut from one allocation sized from the file, so that a
// device's run is normally a view of it, not a copy. Large files are read
// ahead by a goroutine of their own (readahead.go). On 4 cores or more,
// ReadFile hands the rest of a large trace list to a region (region.go):
// workers cut it into chunks by opcode lengths, decode the chunks on all
// cores, and the chunks are committed in order, with the result the
// sequential machine would give (TestRegions and FuzzRegions compare the
// two). Lengths in the input never size an allocation beyond the bytes
// actually read.
//
// # Hostile input
//
// What decoding holds is bounded by the file: the machine refuses to hold
// more values on its stack, dicts, lists or list items than one per 8 bytes
// read, beyond 16k of each (unpickler.bounded), which no snapshot needs and
// which a flood of one-byte opcodes (DUP, EMPTY_DICT, ...) would otherwise
// turn into many bytes of memory per byte of file. A trace list named by two
// devices, a trace entry named twice and a blocks list or block held by two
// segments are refused (PyTorch never shares them), so a trace has at most
// one event per entry dict in the file. A frames list of any depth is kept
// as its stack alone.
//
// # Spilled events
//
// Open decodes with the sequential machine into a spill (spill.go) instead
// of the store: an unlinked temporary file, in the directory the caller
// names, that events are appended to as fixed-size records by a goroutine of
// the spill's own. A device's run is then a range of the file: Device.Events
// is nil, and Device.Len and Device.Chunk read the events back a chunk at a
// time, so that no pass over them holds more than a few chunks. The file's
// pages are in the page cache, not the process's memory, so an import's
// memory grows with the file only through the pickle memo and the tables of
// distinct strings, frames and stacks. OpenFollowed also hands each chunk,
// once written, to a function of the caller's: the import derives there,
// while decoding goes on, what its later passes would read the spill for,
// the start state above all (Forward, forward.go; TestForward_matchesUndo
// checks it against Reconstruct on every real snapshot).
//
// Regions write into the store in place, so Open never uses them. tracer
// import opens files up to 21 MiB (and any file on fewer than 4 cores) with
// Open, and decodes larger ones with ReadFileMappedFollowed: ReadFile with the
// events mapped outside the Go heap and given back by Close (or, behind the
// import's writer and Validate, by Device.DiscardBefore), so that the store,
// sized for the most entries a file could hold, does not set the collector's
// goal. There, a region's committed events are packed into the spill's
// records as the next ones decode (pack.go): for a file of up to 64 MiB
// into an unlinked scratch file (recfile.go), the mapping's pages behind
// them given back, and for a larger one in place, 56 bytes an event at the
// decode's end instead of 88. A device whose run was packed reads it
// through Device.Chunk as a spilled one does (Events nil). The packed
// events go to the caller's follower as they are packed (storefollow.go),
// as a spill's do, unless it falls behind the regions.
// testdata/bench/PERFORMANCE.md has the measurements behind these choices.
//
// # Wrapped histories
//
// PyTorch keeps the trace in a ring buffer; when it wraps, the allocs of
// still-live blocks and the segment_allocs of existing segments are lost.
// Device.Reconstruct (reconstruct.go) walks the trace backwards from the
// dumped segments to rebuild the state at the first retained event, as
// MemoryViz does, and emits it as leading events flagged
// trace.FlagReconstructed.
package torchsnap
