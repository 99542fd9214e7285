/*
Package trace defines tracer's trace format: GPU allocator events stored as an
Apache Arrow IPC stream. It is the only package of tracer that imports Arrow;
everything else sees Event, Reader and Writer.

# Files

A trace is an Arrow IPC *stream* (conventionally ".arrows"), written in
bounded record batches (DefaultBatchRows, 65536 events). The stream format
needs no footer, so a recording killed mid-run is readable up to its last
whole batch; Reader.Truncated then reports that the end-of-stream marker is
missing. Any Arrow implementation reads it. The stack column's dictionary
holds lists of frame ids (see Stacks below), which a table library need not
take in; the other columns, frame (each event's innermost frame) included,
are plain:

	import pyarrow as pa, pyarrow.ipc as ipc
	batches = list(ipc.open_stream("run.arrows"))
	events = pa.Table.from_batches(batches).drop_columns(["stack"])
	# An event's stack id (null: none), valid across batches: the
	# dictionaries only grow.
	stack_id = pa.chunked_array([b.column("stack").indices for b in batches])
	events = events.append_column("stack_id", stack_id)
	# Each stack's text, as FormatStack renders it: frames innermost first,
	# one a line. The last batch's dictionaries hold every frame and stack.
	frames = batches[-1].column("frame").dictionary.to_pylist()
	stacks = ["\n".join(frames[f] for f in ids)
	          for ids in batches[-1].column("stack").dictionary.to_pylist()]
	stack_text = pa.table({"stack_id": pa.array(range(len(stacks)), pa.int32()), "text": stacks})
	df = events.to_pandas()

	import polars as pl
	df = pl.from_arrow(events)

	import duckdb  # finds the pyarrow tables above by their variable names
	duckdb.sql("SELECT action, count(*) FROM events GROUP BY action")
	duckdb.sql("""SELECT t.text, sum(e.size_bytes) AS bytes FROM events e
	              JOIN stack_text t USING (stack_id) WHERE e.action = 'alloc'
	              GROUP BY t.text ORDER BY bytes DESC LIMIT 10""")

DuckDB reads Arrow IPC only through an extension it downloads, but Parquet
natively: WriteParquet (tracer export) writes a trace as one flat Parquet
table (see Parquet export), which needs no pyarrow either:

	duckdb -c "SELECT action, count(*) FROM 'run.parquet' GROUP BY action"

# Columns (format v2)

One row per allocator event, in the order the allocator emitted them. Readers
find columns by name; columns marked optional may be absent in files from
other producers.

	column             type                      unit    meaning
	seq                int64                     -       0-based position in the trace; dense, increasing
	time_us            int64                     µs      time as recorded: µs since the Unix epoch for PyTorch
	                                                     snapshots and live recordings; 0 = unknown (optional).
	                                                     Live recordings read the clock about every 50 µs (every
	                                                     event when events are sparser, at most every 1024) and
	                                                     at every segment or oom event; events between two
	                                                     reads are spread between them (never backwards)
	device             int32                     -       CUDA device ordinal (optional, default 0)
	action             dictionary<int8, utf8>    -       PyTorch's action name (see Kind): alloc, free_requested,
	                                                     free_completed, segment_alloc, segment_free,
	                                                     segment_map, segment_unmap, snapshot, oom; and
	                                                     tracer's empty_cache (see Requests and outcomes)
	addr               uint64                    -       block address (alloc, free_*), segment base
	                                                     (segment_alloc/free), first byte mapped or unmapped
	                                                     (segment_map/unmap); bytes free on the device for oom;
	                                                     0 for snapshot and empty_cache
	size_bytes         int64                     bytes   requested (unrounded) bytes for alloc and free_*;
	                                                     segment bytes for segment_*; the rounded request for
	                                                     oom; total active bytes for snapshot; for
	                                                     empty_cache, the bytes the call released in the
	                                                     recording
	stream             uint64                    -       cudaStream_t as an integer; 0 = legacy default stream
	pool_a, pool_b     uint64                    -       owning memory pool id (a, b); (0, 0) = default pools,
	                                                     otherwise a CUDA graph or MemPool private pool; for
	                                                     oom, the pool the request failed in (optional,
	                                                     default 0)
	stack              dictionary<int32,         -       the event's call stack: the ids of its frames,
	                   list<int32>> nullable             innermost first, indexing the frame table (the frame
	                                                     column's dictionary); null = none recorded. Each
	                                                     distinct stack is stored once, in a dictionary that
	                                                     grows by delta batches
	frame              dictionary<int32, utf8>   -       the event's innermost frame, "name<TAB>file<TAB>line"
	                   nullable                          (FormatFrame; line "?" when unknown), "" for an empty
	                                                     stack; null exactly where stack is null. Its
	                                                     dictionary is the frame table: each distinct frame
	                                                     once, growing by delta batches
	block_size_bytes   int64                     bytes   for alloc and free_*: the block's size after rounding
	                                                     and splitting, when the producer knew it (tracer's
	                                                     allocator, reconstructed blocks); 0 = unknown, as in
	                                                     PyTorch's own trace entries (optional)
	reconstructed      bool                      -       true for events tracer synthesised to restore the
	                                                     state at the start of an incomplete history
	                                                     (optional, default false)
	pending_free       bool                      -       for reconstructed allocs: the block was already freed
	                                                     by the user and awaited its free_completed
	                                                     (cross-stream use) at trace start (optional)
	device_used_bytes  int64                     bytes   device memory in use as NVML last reported it (live
	                                                     GPU recordings; includes the CUDA context and other
	                                                     processes; sampled every 50 ms by default, and a
	                                                     new reading is stamped on events from at most
	                                                     about 50 µs after it arrived); 0 = not sampled
	                                                     (optional)

# Parquet export

WriteParquet writes one row per event, in seq order, in row groups of up to
262144 rows (zstd), with the schema metadata as the file's key/value
metadata. The columns are the trace's own, less stack and frame, plus five
that make SQL need no address matching and no dictionary decoding:

	column             Parquet type                   meaning
	seq .. pool_b      as the trace (addr, stream, pool_a, pool_b: INT64 as
	                   unsigned 64-bit integers; action: a string)
	block_size_bytes, reconstructed, pending_free, device_used_bytes
	                   as the trace
	alloc_seq          INT64, nullable            alloc rows: seq itself; free_requested and
	                                              free_completed rows: the seq of the alloc of the
	                                              block freed (blocks are matched by device and
	                                              address); null elsewhere and for a free whose
	                                              alloc the trace does not hold
	stack_id           INT32, nullable            the stack's id in the trace (null: no stack)
	frame_name         string, nullable           the innermost frame (null: no stack, or an
	frame_file         string, nullable           empty one)
	frame_line         INT32, nullable            null also when the line is unknown
	stack_text         string, nullable           the whole stack as FormatStack renders it
	                                              (stored once per row group by Parquet's
	                                              dictionary encoding); "" for an empty stack

Live bytes at the end of the run by file:line, in DuckDB:

	SELECT frame_file || ':' || frame_line AS site, sum(size_bytes) AS live_bytes
	FROM 'run.parquet' a WHERE action = 'alloc' AND NOT EXISTS
	  (SELECT 1 FROM 'run.parquet' f WHERE f.action = 'free_requested' AND f.alloc_seq = a.seq)
	GROUP BY site ORDER BY live_bytes DESC

# Stacks

A trace stores each distinct frame once, as text, and each distinct stack
as the list of its frames' ids, so that its size grows with the distinct
frames' text plus four bytes a frame of each distinct stack. A frame id
(the stack lists' values) indexes the frame column's dictionary; a stack id
(the stack column's index) its dictionary. Both dictionaries only grow, by
delta dictionary batches, so an id read in one batch means the same in
every later one, and the last batch's dictionaries hold them all.

Format v1 stored each distinct stack's whole text (FormatStack) in the
stack column's dictionary<int32, utf8>, and had no frame column; Reader
reads both.

# Invariants

Per device, in seq order (Validate-style checks report violations as
warnings; readers never fail on them):

  - A synchronous free is free_requested immediately followed by
    free_completed at the same addr. A block used on other streams
    (record_stream) has its free_completed later, at the start of a later
    allocation, or within it: a malloc that retries under a limit waits
    for every stream before it releases the cached segments
    (release_cached_blocks), so free_completed rows, then segment_free
    rows, then the alloc's segment_alloc come before its alloc; the blocks
    they free were not there for the malloc's search.
  - An alloc that needed a new segment follows its segment_alloc (or
    segment_map events). At most one live block starts at an address; every
    live block lies inside a segment.
  - Reconstructed events, if any, come first, before every recorded event of
    their device: one segment_alloc per segment (segment_map per mapped range
    of an expandable segment) that existed at the start, then one alloc per
    block live at the start (block_size_bytes exact; pending_free if awaiting
    completion). Free blocks are the gaps between them. Replaying them and
    then the rest reproduces the final state PyTorch dumped.

# Requests and outcomes

A replay feeds a trace's requests to the allocator model: alloc (a malloc),
free_requested and free_completed (frees), oom (a malloc that failed), and
empty_cache, a torch.cuda.empty_cache() call. Everything else is an outcome
of those requests, which a replay under the recorded settings compares with
its own and a replay under other settings ignores.

PyTorch does not record empty_cache() calls, only the segment_free and
segment_unmap events they cause, which a malloc that reclaims cached memory
causes too. tracer import decides which runs of releases were calls, with
the allocator model replaying the recording under its recorded settings (a
run belongs to the malloc after it when the model says that malloc would
release cached memory, otherwise it was a call; exact while the model
reproduces the recording), and writes one empty_cache row per call, before
the releases it caused, with their first one's time and stack; it sets
tracer.empty_cache, and tracer.x.empty_cache says the rows are inferred. A replay, under any settings, then performs EmptyCache
at those rows: a changed setting does not change what the program asked for.
A MemPool's destruction releases the pool's segments itself, before an
empty_cache() after it releases the default pools': a row's releases that
begin with a MemPool's are that destruction first. Where the import first
took the last of such a run for the default pools' and finds them the
pool's, it keeps the call they showed as a row of size 0 after the run,
possibly after the device's last event. Another call that released nothing
left no event and has no row, unless the
user said the program empties the cache when it catches an OOM (tracer
import --oom-empties-cache, noted as tracer.x.empty_cache_after_oom): then
a row of size 0 follows each OOM after which the program went on, where the
model says the call would have released nothing. In a trace
without tracer.empty_cache (older imports, other producers) a replay infers
the calls from the releases as it goes, which under other settings is a
guess. A replayed trace (tracer replay -o) has a row for every call its
replay performed.

torch.cuda.graph calls empty_cache() too, before each capture, and CUDA
graph trees (torch.compile(mode="reduce-overhead")) capture an empty graph
when they make their pool, then run each function once eagerly in the
pool (a warm-up) and capture it on its next run. A call that released
nothing has no row; a replay infers these from the allocations the
trace's pool ids route to a graph pool (an episode: a run of them that an
allocation into another pool ends), which no setting changes: the pool's
first episode follows a call, which the replay makes unless a row or an
inferred call came right before, with only capture_begin's two 8-byte
allocations in the default pools (the CUDA generator's seed and offset,
at a process's first capture) between; a later episode is a capture,
whose call counts in num_sync_all_streams at the end of the replay,
unless a later episode of the pool repeats its requests after any copies
of its inputs (it was a warm-up, and that one its recording); an episode
still under way when the trace ends (a run that died of an OOM in it) is
not counted. A graph pool is one capture_begin numbers (n, 0), or one
numbered (0, n), as torch.cuda.graph_pool_handle() numbers pools like a
MemPool's (CUDA graph trees' pool is one), first met on a stream other
than the legacy default one. An OOM on the stream of a graph pool's
episode was that pool's malloc: it flushed no cache and counted no retry,
as none may during a capture; tracer import writes the pool into the oom
row. Real runs (testdata/pairs: compile_ro, cuda_graph) bear this out; a
tree that ran a function once, or ended before recording it, shows that
warm-up as a capture.

# Schema metadata

Key/value strings on the schema (Meta):

	tracer.format              "gpu-mem-trace"
	tracer.version             format version, decimal ("2")
	tracer.producer            e.g. "tracer 0.1.0"
	tracer.source              pytorch-snapshot | record | record-python | replay
	tracer.source_file         the imported file's base name
	tracer.alloc_conf          the PYTORCH_CUDA_ALLOC_CONF string the run used ("" = defaults)
	tracer.alloc_settings      JSON object: the allocator settings as the source reported them
	                           (PyTorch's allocator_settings for snapshots)
	tracer.device_name         e.g. "NVIDIA H100 80GB HBM3" ("" = unknown)
	tracer.device_total_bytes  total device memory, bytes (0 = unknown)
	tracer.memory_fraction     set_per_process_memory_fraction argument ("" = none/unknown)
	tracer.memory_limit_bytes  floor(fraction × total): bytes the allocator may reserve (0 = none)
	tracer.history_truncated   "true" when events before the first were lost (ring buffer
	                           wrapped, or recording began mid-run)
	tracer.empty_cache         "rows" when every empty_cache() call that released memory is an
	                           empty_cache row (see Requests and outcomes); absent otherwise
	tracer.annotations         JSON array: the record_function scopes the source recorded (see
	                           Annotations); absent when there are none
	tracer.x.*                 free-form producer annotations (workload name, command line, ...)

# Annotations

PyTorch records, beside the allocator events, when each record_function
scope of the program was entered and left (the snapshot's
external_annotations): the user's own, such as
torch.profiler.record_function("forward"), and those PyTorch opens itself,
such as Optimizer.step#Adam.step and Optimizer.zero_grad#Adam.zero_grad.
tracer import keeps them in tracer.annotations, one object per edge, sorted
by time:

	{"name": "forward", "stage": "START", "device": 0, "time_us": 1795280309912757}

stage is START or END; device is the CUDA device that was current; time_us
is on the time_us column's clock. An event of device d at time t lies in
every scope of device d entered at or before t and left after t; tracer
analyze calls the innermost one the event's phase. PyTorch keeps them in a
ring buffer of the history's length, so an END may come without its START
(the scope was entered before the history begins). Being metadata, they are
read in full with the schema:

	import json
	json.loads(ipc.open_stream("run.arrows").schema.metadata[b"tracer.annotations"])

# Versions

	version  tracer  change
	1        0.1.0   first release
	2        0.1.0   stack holds lists of frame ids; frame column (the frame table)

Adding an optional column or metadata key keeps the version. Changing a
column's unit or meaning bumps Current, adds testdata/v<N>.arrows, and adds a
row here. A reader refuses versions newer than Current with a VersionError
that says to upgrade.
*/
package trace
