package trace

import (
	"fmt"
	"math"
)

// Kind is what an allocator event did. The names mirror the `action` strings of
// PyTorch's memory history (torch.cuda.memory._record_memory_history), so a
// trace diffs one to one against a snapshot: KindAlloc is "alloc",
// KindFreeRequested is "free_requested", and so on. The zero Kind is invalid.
type Kind uint8

const (
	KindInvalid       Kind = iota
	KindAlloc              // a block was handed to the caller; Size = requested bytes
	KindFreeRequested      // the caller freed a block; Size = requested bytes
	KindFreeCompleted      // the block returned to the cache (after cross-stream events); Size = requested bytes
	KindSegmentAlloc       // cudaMalloc of a new segment; Addr = base, Size = segment bytes
	KindSegmentFree        // cudaFree of a segment; Addr = base, Size = segment bytes
	KindSegmentMap         // expandable segment grew; Addr = first mapped byte, Size = mapped bytes
	KindSegmentUnmap       // expandable segment pages released; Addr = first unmapped byte, Size = bytes
	KindSnapshot           // a snapshot was taken; Size = active bytes at that moment
	KindOOM                // an out-of-memory error is about to be raised; Addr = device free bytes, Size = rounded request
	// KindEmptyCache is a torch.cuda.empty_cache() call: a request, not an
	// allocator event, which PyTorch's history does not record. tracer
	// import infers it (see doc.go); Size = the bytes the call released in
	// the recording, Addr = 0. Its segment_free/segment_unmap rows follow.
	KindEmptyCache
	numKinds
)

var kindNames = [numKinds]string{
	KindInvalid:       "invalid",
	KindAlloc:         "alloc",
	KindFreeRequested: "free_requested",
	KindFreeCompleted: "free_completed",
	KindSegmentAlloc:  "segment_alloc",
	KindSegmentFree:   "segment_free",
	KindSegmentMap:    "segment_map",
	KindSegmentUnmap:  "segment_unmap",
	KindSnapshot:      "snapshot",
	KindOOM:           "oom",
	KindEmptyCache:    "empty_cache",
}

// Kinds lists every valid Kind in declaration order.
func Kinds() []Kind {
	ks := make([]Kind, 0, numKinds-1)
	for k := KindAlloc; k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// String returns PyTorch's action name for k.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Valid reports whether k is one of the declared kinds.
func (k Kind) Valid() bool { return k > KindInvalid && k < numKinds }

// ParseKind maps a PyTorch action name to its Kind. ok is false for names
// this version does not know; readers skip such events and count them.
func ParseKind(action string) (k Kind, ok bool) {
	for i := KindAlloc; i < numKinds; i++ {
		if kindNames[i] == action {
			return i, true
		}
	}
	return KindInvalid, false
}

// PoolID names a memory pool as PyTorch does: (0, 0) is the default pools;
// anything else is a private pool (a CUDA graph capture or a torch.cuda.MemPool).
type PoolID struct{ A, B uint64 }

// IsDefault reports whether p is the default pool pair (0, 0).
func (p PoolID) IsDefault() bool { return p.A == 0 && p.B == 0 }

// StackID indexes a trace's stack table. NoStack means no stack was recorded.
type StackID int32

// NoStack is the StackID of an event without a recorded stack.
const NoStack StackID = -1

// Frame is one Python (or C++) frame, innermost first within a Stack.
type Frame struct {
	Name string
	File string
	Line int32 // 1-based; UnknownLine when the producer had none
}

// UnknownLine is the Line of a frame whose line number is unknown: PyTorch
// stores line numbers unsigned, and writes 2^64-1 (-1) for frames it has
// none for (frees while an exception unwinds, torch.compile frames).
// FormatStack renders it "?". Any Line below 0 means the same.
const UnknownLine int32 = -1

// LineOf returns the Line for a line number n as a producer wrote it:
// n itself when it fits, UnknownLine when it is negative or too large.
func LineOf(n int64) int32 {
	if n < 0 || n > math.MaxInt32 {
		return UnknownLine
	}
	return int32(n)
}

// Stack is the call stack of an event, innermost frame first, as PyTorch stores it.
type Stack []Frame

// Flags qualify an event.
type Flags uint8

const (
	// FlagReconstructed marks an event that tracer synthesised to rebuild the
	// allocator state at the start of a wrapped (truncated) history: a segment or
	// block that already existed when the first retained event happened.
	FlagReconstructed Flags = 1 << iota
	// FlagPending marks a reconstructed alloc whose block was awaiting its
	// cross-stream free_completed at trace start (free_requested already happened).
	FlagPending
)

// Event is one allocator event. Sizes and addresses are bytes; TimeUs is
// microseconds as recorded (Unix epoch for PyTorch snapshots, or since the
// start of a live recording). Addr and Stream are raw handles compared as
// unsigned integers.
type Event struct {
	Seq    int64   // 0-based position in the trace, dense and increasing
	TimeUs int64   // as recorded; 0 when unknown
	Device int32   // CUDA ordinal
	Kind   Kind    // what happened
	Addr   uint64  // block or segment address; device free bytes for KindOOM
	Size   int64   // bytes; meaning per Kind (requested bytes for alloc/free_*)
	Stream uint64  // cudaStream_t as an integer; 0 is the legacy default stream
	Pool   PoolID  // owning pool; zero for the default pools
	Stack  StackID // index into the trace's stack table, or NoStack
	Flags  Flags
	// BlockSize is the block's size in bytes after rounding and splitting, for
	// alloc and free_* events, when the producer knew it (our allocator, or a
	// reconstructed block); 0 when unknown, as in a PyTorch trace entry.
	BlockSize int64
	// DeviceUsed is the device memory in use as NVML last reported it when
	// the event happened (live recordings on a GPU); it includes the CUDA
	// context and other processes, which no allocator counts. 0 = unknown.
	DeviceUsed int64
	// Ref, when not 0, numbers the block an alloc or free_* event is
	// about: the same number from the block's alloc to its free_completed,
	// given to another block after, so that the numbers in use never
	// exceed the blocks live at once. A replay keeps its blocks by it (an
	// array index) rather than by address (a hash lookup, a cache miss per
	// event in a large trace). It is not stored in a trace: a stage before
	// the replay sets it (replay.BlockNumbers).
	Ref int32
}

// Reconstructed reports whether tracer synthesised e to restore pre-trace state.
func (e *Event) Reconstructed() bool { return e.Flags&FlagReconstructed != 0 }
