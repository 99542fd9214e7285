// Package allocator is an exact model of PyTorch's native CUDA caching
// allocator (c10/cuda/CUDACachingAllocator.cpp, torch 2.11), as specified in
// shared/spec/caching-allocator.md (cited here as §N).
//
// An Allocator is one DeviceCachingAllocator. Malloc rounds the request
// (round_size, §3.1–3.2), picks the small or large pool of the default or an
// active private pool (§3.3, §15), and runs the malloc sequence of §4: process
// completed cross-stream frees, best fit in the pool's free set ordered by
// (stream, size, address) with the oversize and expandable rules (§5), then
// garbage collection (§10), a new segment (alloc_block, §7.1), the
// release_available_cached_blocks fallback (§7.2) and the full flush with one
// retry (§7.3), and finally the OOM path (§12). A found block is split from
// the front when should_split says so (§6).
//
// Free (§8) returns a block at once, or, when RecordStream named other
// streams, leaves it active_pending_free until CompleteFree (or
// MarkEventsDone and the next Malloc's process_events, or a flush) completes
// its events; CompleteLate says they complete within the next Malloc, after
// its search: the completions a retry's synchronize makes, which PyTorch
// records before the malloc's own events. With expandable_segments (§9) segments are virtual reservations
// mapped and unmapped in whole pages; map and unmap move reserved bytes and
// num_device_alloc/free but never the segment count.
//
// Every statistic of torch.cuda.memory_stats() is kept with PyTorch's update
// rules (§11); Stats().Map() flattens them under the same names. The
// allocator emits PyTorch's trace entries (§13) in PyTorch's order, with the
// block size added, to an Observer (a call per event) or to an EventSink (the
// live recorder: the allocator writes most events straight into the sink's
// memory, inline, with no call, 32 bytes each, and a synchronous free's two
// entries as one, ActFreeSync); it depends on nothing in this module but
// internal/addrmap, so any package can use it. Segments reports the layout as a snapshot's
// `segments` list, Restore installs a starting state (for traces whose history
// wrapped), and CheckInvariants verifies the whole state, which the tests and
// FuzzAllocator do after every step.
//
// Private pools (§15): BeginAllocateToPool routes a stream's mallocs to a
// CUDA graph's or MemPool's pool until EndAllocateToPool; ReleasePool drops
// a use (graph destroyed, MemPool dropped), and only a pool with no uses
// gives its free segments back, small then large, after the default pools
// in EmptyCache, or alone in EmptyPoolCache (a MemPool's destruction),
// which, like PyTorch's synchronize_and_free_events(pool), counts in
// num_sync_all_streams only when the pool is freeable. A pool is deleted once
// it owns no segment. Fits, InUse, ExpandableOwner and HasExpandable answer
// the questions with which a replay infers, from a torch 2.11 trace that
// names no pools, which pool served a recorded request (replay/pools.go).
//
// Memory comes from a Device: the real GPU (package cuda) or SimDevice, a
// capacity budget with deterministic addresses that can be told the addresses
// of a recording so a replay places every block where PyTorch did. The
// memory limit of set_per_process_memory_fraction is SetMemoryLimit (§14).
//
// Beyond PyTorch, the constants of §2 (rounding quantum, small-request limit,
// segment sizes, large rounding) are Conf fields, for what-if replays.
//
// Blocks live in an arena indexed by int32. A pool's free mapped blocks are
// a sizeSet: per stream, log-linear size classes whose 32-byte header holds
// the class's smallest block (most classes hold at most one), with a bitmap
// of the non-empty classes, and a crowded class's other blocks in a B+tree
// (kTree); the unmapped tails of expandable segments are a kTree too, so
// that every update is O(log n) whatever the order of the frees. Addresses map to active blocks through a hash
// map that is built on the first call naming a block by address (Free,
// RecordStream, Pending, ...) and kept from then on: a caller that keeps
// the Handle MallocHandle returns and frees with FreeHandle, as the replay
// does, never needs it. The Malloc/Free hot path allocates nothing once the
// arena and free sets have grown.
package allocator
