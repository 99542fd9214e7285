package torchsnap

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"time"

	"github.com/tracer-dev/tracer/internal/grow"
	"github.com/tracer-dev/tracer/trace"
)

// Snapshot is a decoded memory snapshot.
type Snapshot struct {
	Settings     Settings      // from allocator_settings; zero if absent
	Devices      []*Device     // one per device that has a trace or segments, ordered by index
	Stacks       []trace.Stack // stack table; trace.StackID indexes it; identical stacks stored once
	Annotations  []Annotation  // external_annotations, in recorded order
	SegmentsOnly bool          // the file was a bare list (memory_snapshot()): state only, no trace
	// Regions are the spans of the file the parallel decoder decoded
	// (region.go), in order; the rest was decoded on one goroutine.
	Regions []RegionSpan
	// Ahead is what the workers that read the segments' blocks ahead of
	// the decoder did, if any ran.
	Ahead AheadSpan

	spill  *spill   // Open's events, if any
	mapped []byte   // ReadFileMapped's events, if outside the heap
	rf     *recFile // ReadFileMappedIn's packed events, if in a scratch file
}

// RegionSpan is a span of the file that a region decoded in parallel: its
// offsets, when it started and ended, and the process's CPU time then,
// for the import's stage report (TRACER_STAGES), which tells the
// decode's parallel part from its sequential one. StartThread is the
// decoding thread's CPU time at the start, which measures the decoder's
// own work before it where the caller keeps its goroutine on its thread.
type RegionSpan struct {
	Off, End          int64
	Start, Stop       time.Time
	StartCPU, StopCPU time.Duration
	StartThread       time.Duration
}

// Spilled reports whether the devices' events are in a file, read back a
// chunk at a time by Chunk: a spill (Open), or the scratch file of
// ReadFileMappedIn's packed records. Its caller then holds a few chunks
// of events at a time, as it would for a spill.
func (s *Snapshot) Spilled() bool { return s.spill != nil || s.rf != nil }

// Close releases the file that holds the events of a snapshot from Open
// (it is already unlinked), or the memory that holds ReadFileMapped's, and
// sets the devices' Events to nil. It does nothing for ReadFile's and
// Decode's.
func (s *Snapshot) Close() {
	s.spill.close()
	if s.mapped != nil || s.rf != nil {
		for _, d := range s.Devices {
			// No view of the memory given back below. A reader done with
			// the events may still say so (DiscardBefore, an import's
			// writer after the spill's last reader closed it): under its
			// lock, with the mapping forgotten, it gives back nothing.
			if dc := d.disc; dc != nil {
				dc.mu.Lock()
				dc.mapped = nil
				d.Events, d.recs, d.rf = nil, nil, nil
				dc.mu.Unlock()
				continue
			}
			d.Events, d.recs, d.rf = nil, nil, nil
		}
	}
	if s.mapped != nil {
		unmapEvents(s.mapped)
		s.mapped = nil
	}
	s.rf.close()
	s.rf = nil
}

// Device is one CUDA device's trace and final allocator state.
type Device struct {
	Index int32
	// Events is the trace in recorded order. Device, Kind, Addr (device_free
	// for oom), Size, Stream, TimeUs and Stack are set; Seq is the position.
	// It is nil for a snapshot from Open, whose events stay in its spill
	// file, and for most of ReadFileMapped's, whose events are packed
	// (pack.go): Len and Chunk read every form.
	Events []trace.Event
	// Segments is the final state from `segments`, this device only, sorted by address.
	Segments []Segment
	// Skipped counts trace entries with unknown action strings, by action.
	Skipped map[string]int
	// Truncated is set by Reconstruct: the history is incomplete (state
	// existed before the first event, or a free had no alloc in the window).
	Truncated bool

	maxSplit int64 // recorded max_split_size; ≤ 0 unlimited

	// The state before Events[0] that Reconstruct derived (by a backward
	// walk of startOf, the Events it saw), for Validate to reuse.
	start   *keptStart
	startOf []trace.Event

	// The spilled trace (Open): events [spLo, spLo+spN) of sp.
	sp        *spill
	spLo, spN int64

	disc *discarder // ReadFileMapped's: see DiscardBefore

	// The packed trace (ReadFileMapped): records [recsLo, recsLo+len(recs))
	// of the store's mapping, or records [rfLo, rfLo+rfN) of its scratch
	// file (ReadFileMappedIn).
	recs      []srec
	recsLo    int64
	rf        *recFile
	rfLo, rfN int64
	// followN is how many of the store's events, from the first, a
	// ReadFileMappedFollowed follower was given, all it was offered; -1
	// where it was dropped, or there was none.
	followN int64
}

// Len returns the number of events in d's trace.
func (d *Device) Len() int64 {
	if d.sp != nil {
		return d.spN
	}
	if d.recs != nil {
		return int64(len(d.recs))
	}
	if d.rf != nil {
		return d.rfN
	}
	return int64(len(d.Events))
}

// Chunk returns events [lo, hi) of d's trace (0 ≤ lo ≤ hi ≤ d.Len()): a view
// of d.Events, or, for a snapshot from Open or a packed one, the events
// read into buf, which must hold hi-lo of them. Passes over a trace of any length read it
// this way a chunk at a time (ChunkSize events: Open's events are never all
// in memory at once). Changes to a spilled chunk are not kept.
func (d *Device) Chunk(lo, hi int64, buf []trace.Event) ([]trace.Event, error) {
	if d.recs != nil {
		evs := buf[:hi-lo]
		widenRecs(evs, d.recs[lo:hi], lo, d.Index)
		return evs, nil
	}
	if d.rf != nil {
		evs := buf[:hi-lo]
		if err := d.rf.readWide(evs, d.rfLo+lo, lo, d.Index); err != nil {
			return nil, fmt.Errorf("torchsnap: device %d: %w", d.Index, err)
		}
		return evs, nil
	}
	if d.sp == nil {
		return d.Events[lo:hi], nil
	}
	evs := buf[:hi-lo]
	if err := d.sp.readAs(evs, d.spLo+lo, lo, d.Index); err != nil {
		return nil, fmt.Errorf("torchsnap: device %d: %w", d.Index, err)
	}
	return evs, nil
}

// chunkBuf returns a buffer for Chunk: ChunkSize events for a spilled
// trace (d.Len() if fewer: its callers read no range longer than
// min(ChunkSize, d.Len())), none for one in memory, whose chunks are
// views.
func (d *Device) chunkBuf() []trace.Event {
	if d.sp == nil && d.recs == nil && d.rf == nil {
		return nil
	}
	return make([]trace.Event, min(ChunkSize, d.Len()))
}

// ChunkSize is the number of events the passes over a spilled trace read at
// a time (Chunk).
const ChunkSize = spillChunk

// Segment is one cudaMalloc'd segment (or mapped range of an expandable one)
// at snapshot time.
type Segment struct {
	Addr                                                uint64
	TotalSize, AllocatedSize, ActiveSize, RequestedSize int64
	Stream                                              uint64
	Pool                                                trace.PoolID
	Large, Expandable                                   bool
	Stack                                               trace.StackID
	Blocks                                              []Block // tile the segment in address order
}

// Block is one block of a segment at snapshot time.
type Block struct {
	Addr          uint64
	Size          int64 // after rounding and splitting
	RequestedSize int64 // the current or last request; may be stale for inactive blocks
	State         BlockState
	Stack         trace.StackID
}

// BlockState is a block's state in a snapshot.
type BlockState uint8

const (
	Inactive          BlockState = iota // cached free
	ActiveAllocated                     // a live tensor
	ActivePendingFree                   // freed by the user, waiting on record_stream events
)

// String returns PyTorch's name for s.
func (s BlockState) String() string {
	switch s {
	case Inactive:
		return "inactive"
	case ActiveAllocated:
		return "active_allocated"
	case ActivePendingFree:
		return "active_pending_free"
	}
	return fmt.Sprintf("BlockState(%d)", uint8(s))
}

// Live reports whether a block in state s holds memory a user asked for.
func (s BlockState) Live() bool { return s == ActiveAllocated || s == ActivePendingFree }

// ReadFile decodes the snapshot in the file at path.
func ReadFile(path string) (*Snapshot, error) { return readFile(path, false, "", nil) }

// ReadFileMapped is ReadFile with the events in memory mapped outside the
// Go heap, given back by Close: after Close the devices' Events are nil,
// and no slice of them kept from before may be used. The events are packed
// in that memory (pack.go): a device's Events is nil where they are, and
// Len and Chunk read them. An import decodes a
// large file in memory this way. Its store is sized for the most entries
// the file could hold (about twice what a real snapshot has); on the heap,
// that size would set the collector's goal, and the garbage of decoding
// would grow with it.
func ReadFileMapped(path string) (*Snapshot, error) { return readFile(path, true, "", nil) }

// ReadFileMappedIn is ReadFileMapped that, for a file of up to 64 MiB,
// keeps the packed events in an unlinked scratch file in dir rather than
// in memory (recfile.go), as Open keeps its spill: the decode holds only
// the events not yet packed, and Chunk reads the rest back from the file.
// Where the file cannot be made, it is ReadFileMapped. An importer passes
// the output's directory, as it does to Open.
func ReadFileMappedIn(path, dir string) (*Snapshot, error) { return readFile(path, true, dir, nil) }

// ReadFileMappedFollowed is ReadFileMappedIn (dir "": ReadFileMapped) that
// also hands the events it packs to follow, as OpenFollowed hands those it
// spills: in order, a chunk at a time, as decoding goes on, on another
// goroutine than the decoder's, with Seq the event's index among all the
// decoded events and Device unset. Where following would slow the decode
// (the follower falls behind) or the events cannot all be packed in order,
// follow is given no more, and is called once with nil, so that it can let
// go of what it holds; Forward.Followed tells whether it was given exactly
// a device's events. Every call has returned when ReadFileMappedFollowed
// does.
func ReadFileMappedFollowed(path, dir string, follow func([]trace.Event)) (*Snapshot, error) {
	return readFile(path, true, dir, follow)
}

func readFile(path string, offHeap bool, scratch string, follow func([]trace.Event)) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("torchsnap: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil && st.Mode().IsRegular() && st.Size() >= parMinFile {
		s, err := decodeAt(&parSource{ra: f, size: st.Size(), offHeap: offHeap, scratch: scratch, follow: follow})
		if err != errParFallback {
			if err != nil {
				return nil, fmt.Errorf("torchsnap: %s: %w", path, err)
			}
			return s, nil
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("torchsnap: %w", err)
		}
	}
	return readSequential(f, path, nil, nil, offHeap, scratch, follow)
}

// readSequential decodes the file f (at path) with the sequential decoder,
// into sp when it is not nil, making what the decode alone uses in off
// when it is not nil (decodeWith); offHeap, scratch and follow are
// ReadFileMappedFollowed's.
func readSequential(f *os.File, path string, sp *spill, off *grow.OffHeap, offHeap bool, scratch string, follow func([]trace.Event)) (*Snapshot, error) {
	var r io.Reader = f
	var size int64
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
		if size >= readAheadMin {
			block := readAheadBlock
			if sp != nil {
				block = spillReadAhead
			}
			ra := newReadAheadSized(f, block, off)
			defer ra.close()
			r = ra
		}
	}
	s, err := decodeWith(r, size, sp, off, offHeap, scratch, follow)
	if err != nil {
		return nil, fmt.Errorf("torchsnap: %s: %w", path, err)
	}
	return s, nil
}

// Open decodes the snapshot in the file at path as ReadFile does, with the
// sequential decoder, but keeps the devices' trace events in an unlinked
// temporary file (a spill, spill.go) rather than in memory: Device.Events is
// nil, and Device.Len and Device.Chunk read them. Its memory does not grow
// with the number of trace entries. Close releases the file. The file is
// made in spillDir, or os.TempDir() when it is empty: an importer passes
// the output's directory, where the disk has room for the output (a
// spill takes 56 bytes an event) and which is less often a tmpfs, whose
// pages would stay in memory.
func Open(path, spillDir string) (*Snapshot, error) {
	return OpenFollowed(path, spillDir, nil)
}

// OpenFollowed is Open that also hands every event it spills to follow,
// in order, a chunk at a time, as decoding goes on: on another goroutine
// than the decoder's, with Seq the event's index among all the spilled
// events and Device unset (a device's events are known as its trace list
// ends; Forward.Covers tells whether they were all of them). The events
// are follow's until it returns. Every call has returned when OpenFollowed
// does.
func OpenFollowed(path, spillDir string, follow func([]trace.Event)) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("torchsnap: %w", err)
	}
	defer f.Close()
	var size int64 // sizes the spill's buffers
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	// What only the decode uses (the pickle memo, the read buffers, the
	// spill's record buffers) is made outside the Go heap and unmapped as
	// soon as it is done: its pages go back to the system at once, with
	// no collection to find them first.
	// It is released where the spill's writer and the read-ahead have
	// stopped (not on a panic, which leaves it mapped).
	off := new(grow.OffHeap)
	sp, err := newSpillOff(spillDir, follow, size, off)
	if err != nil {
		off.Release()
		return nil, fmt.Errorf("torchsnap: %s: %w", path, err)
	}
	s, err := readSequential(f, path, sp, off, false, "", nil)
	if err == nil {
		if err = sp.finish(); err != nil {
			err = fmt.Errorf("torchsnap: %s: %w", path, err)
		}
	}
	if err != nil {
		sp.close()
		off.Release()
		return nil, err
	}
	off.Release()
	s.spill = sp
	return s, nil
}

// Decode reads a snapshot from r: a pickle (protocol 2 to 5) or the JSON form
// MemoryViz accepts, told apart by the first byte.
func Decode(r io.Reader) (*Snapshot, error) {
	if br, ok := r.(*bytes.Reader); ok && br.Len() == int(br.Size()) && br.Size() >= parMinFile {
		s, err := decodeAt(&parSource{ra: br, size: br.Size()})
		if err != errParFallback {
			if err != nil {
				return nil, fmt.Errorf("torchsnap: %w", err)
			}
			return s, nil
		}
	}
	var size int64
	if br, ok := r.(*bytes.Reader); ok {
		size = int64(br.Len())
	}
	s, err := decode(r, size)
	if err != nil {
		return nil, fmt.Errorf("torchsnap: %w", err)
	}
	return s, nil
}

// decode reads a snapshot from r, whose size (0 if unknown) sizes the tables.
func decode(r io.Reader, size int64) (*Snapshot, error) { return decodeInto(r, size, nil) }

// decodeInto is decode, with the events written to sp when it is not nil.
func decodeInto(r io.Reader, size int64, sp *spill) (*Snapshot, error) {
	return decodeWith(r, size, sp, nil, false, "", nil)
}

// decodeWith is decodeInto, with the events outside the Go heap when
// offHeap is set and sp is nil (ReadFileMapped), their packed records in a
// scratch file in scratch if not empty (ReadFileMappedIn), and handed to
// follow as they are packed if it is not nil (ReadFileMappedFollowed).
// The pickle memo and the unpickler's buffer are made in off when it is
// not nil; nothing refers to them once decodeWith returns.
func decodeWith(r io.Reader, size int64, sp *spill, off *grow.OffHeap, offHeap bool, scratch string, follow func([]trace.Event)) (s *Snapshot, err error) {
	br := bufio.NewReaderSize(r, readBufFor(size, 64<<10))
	b := newBuilder()
	b.memo.off, b.lists.off = off, off
	defer func() {
		b.finishFollow(s)
		if err != nil {
			b.events.release()
		}
	}()
	if b.events.sp = sp; sp == nil {
		b.events.offHeap, b.events.scratch = offHeap, scratch
		b.events.sizeFor(size)
		b.startFollow(follow)
	}
	b.memo.sizeFor(size)
	b.lists.sizeFor(size)
	var top value
	first, err := sniff(br)
	if err != nil {
		return nil, err
	}
	switch first {
	case opProto:
		top, err = newUnpicklerSized(br, b, size, off).run()
	case '{', '[':
		top, err = decodeJSON(br, b)
	case '(', '}', ']', ')', 'c', 'd', 'l', 'I', 'N':
		// What pickle.dump writes first at protocols 0 and 1, which have no
		// PROTO opcode: a mark, an empty dict or list, a class, ...
		return nil, fmt.Errorf(notSnapshot+"a pickle of protocol 0 or 1 (starts with %q); tracer reads pickle protocols 2 to 5 (what torch.cuda.memory._dump_snapshot writes) and JSON: load it and pickle.dump it again with protocol=4", first)
	default:
		return nil, fmt.Errorf(notSnapshot+"neither a pickle (protocols 2 to 5) nor JSON (starts with %q)", first)
	}
	if err != nil {
		return nil, err
	}
	b.memo = memo{} // not needed past the pickle: let the collector have it
	return b.assembleOwned(top)
}

// decodeAt decodes a pickle that the decoder may read anywhere, handing
// large trace lists to regions (parallel.go). It returns errParFallback for
// anything but a pickle, or when a region fell back: then the caller decodes
// the file again with decode.
func decodeAt(src *parSource) (s *Snapshot, err error) {
	var p [1]byte
	if n, _ := src.ra.ReadAt(p[:], 0); n == 0 || p[0] != opProto {
		return nil, errParFallback
	}
	b := newBuilder()
	defer func() {
		b.finishFollow(s)
		if err != nil {
			b.events.release()
		}
	}()
	b.events.offHeap, b.events.scratch = src.offHeap, src.scratch
	b.events.sizeFor(src.size)
	b.startFollow(src.follow)
	b.memo.sizeFor(src.size)
	b.lists.sizeFor(src.size)
	u := newUnpickler(nil, b)
	u.par = src
	u.openAt(0)
	defer u.closeSrc()
	defer u.stopAhead()
	top, err := u.run()
	if err != nil {
		if errors.Is(err, errParFallback) {
			return nil, errParFallback
		}
		return nil, err
	}
	u.closeSrc()
	u.stopAhead()
	b.memo = memo{}
	return b.assembleOwned(top)
}

// sniff returns the first byte that is not JSON whitespace, without consuming it.
func sniff(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			return 0, errors.New(notSnapshot + "empty file")
		}
		if err != nil {
			return 0, err
		}
		if c == opProto || !bytes.ContainsRune([]byte(" \t\r\n"), rune(c)) {
			br.UnreadByte()
			return c, nil
		}
	}
}

// assembleOwned is assemble, handing the snapshot the store's off-heap
// memory, if any, to give back on Close.
func (b *builder) assembleOwned(top value) (*Snapshot, error) {
	s, err := b.assemble(top)
	if err != nil {
		return nil, err
	}
	s.mapped, s.rf = b.events.mapped, b.events.rf
	s.Regions, s.Ahead = b.regions, b.ahead
	if s.mapped != nil {
		for _, d := range s.Devices {
			d.disc = &discarder{mapped: s.mapped}
		}
	}
	return s, nil
}

// assemble turns the decoded top-level object into a Snapshot.
func (b *builder) assemble(top value) (*Snapshot, error) {
	s := &Snapshot{}
	var segs, traces value
	switch top.k {
	case vList:
		s.SegmentsOnly = true
		segs = top
	case vDict:
		d := &b.dicts[top.i]
		found := false
		for j, k := range d.keys {
			if k.k != vStr {
				continue
			}
			v := d.vals[j]
			var err error
			switch k.i {
			case kSegments:
				segs, found = v, true
			case kDeviceTraces:
				traces, found = v, true
			case kAllocatorSettings:
				s.Settings, err = b.settings(v)
			case kExternalAnnotations:
				s.Annotations, err = b.annotations(v)
			}
			if err != nil {
				return nil, err
			}
		}
		if !found {
			return nil, errors.New(notSnapshot + "the top-level dict has neither device_traces nor segments")
		}
	default:
		return nil, fmt.Errorf(notSnapshot+"the top level is a %v, want a dict or a list of segments", top.k)
	}
	devs := map[int32]*Device{}
	dev := func(i int32) *Device {
		d := devs[i]
		if d == nil {
			d = &Device{Index: i, Skipped: map[string]int{}}
			devs[i] = d
		}
		return d
	}
	if segs.k != vNone {
		if segs.k != vList && segs.k != vTuple {
			return nil, fmt.Errorf(notSnapshot+"segments is a %v, want a list", segs.k)
		}
		for i, v := range b.items(segs) {
			if v.k != vSegment {
				return nil, fmt.Errorf(notSnapshot+"segments[%d] is a %v, want a segment dict", i, v.k)
			}
			r := &b.segments[v.i]
			d := dev(r.device)
			d.Segments = append(d.Segments, r.Segment)
		}
	}
	if traces.k != vNone {
		if traces.k != vList && traces.k != vTuple {
			return nil, fmt.Errorf(notSnapshot+"device_traces is a %v, want a list", traces.k)
		}
		if err := b.checkShared(b.items(traces)); err != nil {
			return nil, err
		}
		for i, tv := range b.items(traces) {
			if tv.k != vList && tv.k != vTuple {
				return nil, fmt.Errorf(notSnapshot+"device_traces[%d] is a %v, want a list", i, tv.k)
			}
			o := b.lists.at(tv.i)
			if len(o.vals) == 0 && o.evN == 0 && o.blkN == 0 && !o.derived {
				continue
			}
			d := dev(int32(i))
			evs, err := b.gather(o, d)
			if err != nil {
				return nil, fmt.Errorf(notSnapshot+"device_traces[%d]%v", i, err)
			}
			d.Events = evs
		}
	}
	for _, d := range devs {
		d.maxSplit = s.Settings.MaxSplitSize
		sort.Slice(d.Segments, func(i, j int) bool { return d.Segments[i].Addr < d.Segments[j].Addr })
		s.Devices = append(s.Devices, d)
	}
	slices.SortFunc(s.Devices, func(a, b *Device) int { return int(a.Index) - int(b.Index) })
	s.Stacks = b.stacks
	return s, nil
}

// checkShared refuses device traces that hold more entries than the file
// has trace entries: a trace list in two devices, or an entry twice in the
// lists. PyTorch never shares either, and a file that does could expand
// without bound (one 10,000-entry list named 10,000 times is 100M events
// from 590 KB); refused, a trace holds at most one event per entry dict
// decoded.
func (b *builder) checkShared(lists []value) error {
	var n int64
	seen := make(map[int64]int, len(lists))
	for i, tv := range lists {
		if tv.k != vList && tv.k != vTuple {
			continue // gather's loop reports it
		}
		if j, ok := seen[tv.i]; ok {
			return fmt.Errorf(notSnapshot+"device_traces[%d] is the same list as device_traces[%d] (PyTorch never shares a trace list)", i, j)
		}
		seen[tv.i] = i
		o := b.lists.at(tv.i)
		n += o.evN
		for _, v := range o.vals {
			if v.k == vEvent {
				n++
			}
		}
	}
	if n > b.events.n {
		return fmt.Errorf(notSnapshot+"the device traces hold %d trace entries but the file has %d: an entry is used more than once (PyTorch never shares one)", n, b.events.n)
	}
	return nil
}

// gather builds a device's events from its trace list, usually a run of
// consecutive decoded events. Events are copied once, into a slice of the
// exact size, and the store's chunks are released behind the copy so the
// compact and final forms are not both held for the whole file.
func (b *builder) gather(o *listObj, d *Device) ([]trace.Event, error) {
	if o.derived {
		b.underive(o)
	}
	if o.blkN > 0 {
		b.materialize(o) // reported below
	}
	if len(o.vals) == 0 {
		return b.gatherRun(o, d)
	}
	var evs []trace.Event
	for j, v := range o.vals {
		switch v.k {
		case vEvent:
			e, ok := b.events.get(v.i)
			if !ok {
				return nil, fmt.Errorf("[%d] is a trace entry already used by another device", j)
			}
			ev := *e
			ev.Seq, ev.Device = int64(len(evs)), d.Index
			evs = append(evs, ev)
		case vSkipped:
			d.Skipped[b.strs[v.i]]++
		default:
			return nil, fmt.Errorf("[%d] is a %v, want a trace entry dict", j, v.k)
		}
	}
	return evs, nil
}

// gatherRun copies a run of consecutive events into a device's slice: on two
// cores for a large run, a part at a time, and each part's chunks of the
// compact store are released behind the copy, with the memory returned to
// the operating system, so that the peak holds the final events and only a
// part of the compact ones (a large snapshot's events are most of its memory).
func (b *builder) gatherRun(o *listObj, d *Device) ([]trace.Event, error) {
	if o.evN > 0 {
		// Every chunk the run covers must still be there: a run used by two
		// devices is a malformed file, not a shared list.
		for c := o.evLo >> chunkBits; c <= (o.evLo+o.evN-1)>>chunkBits; c++ {
			if b.events.released(c) {
				return nil, fmt.Errorf("[%d] is a trace entry already used by another device", max(0, c<<chunkBits-o.evLo))
			}
		}
	}
	if b.events.sp != nil {
		// Spilled (Open): the device reads its run from the file.
		d.sp, d.spLo, d.spN = b.events.sp, o.evLo, o.evN
		b.events.releaseBelow(o.evLo + o.evN)
		return nil, nil
	}
	b.events.packAll(true)
	if o.evN > 0 && o.evLo+o.evN <= b.events.packed {
		// Packed: the device reads its run from the records.
		if _, ok := b.events.inBase(o.evLo, o.evN); ok {
			if b.events.rf != nil {
				d.rf, d.rfLo, d.rfN = b.events.rf, o.evLo, o.evN
			} else {
				d.recs, d.recsLo = b.events.records()[o.evLo:o.evLo+o.evN:o.evLo+o.evN], o.evLo
			}
			b.events.releaseBelow(o.evLo + o.evN)
			return nil, nil
		}
	}
	if evs, ok := b.events.inBase(o.evLo, o.evN); ok && o.evLo >= b.events.packed {
		// The events are already in place: set what decoding could not
		// know (nothing for the usual first run of device 0: see cev), and
		// claim them (a second use is then an error, as below).
		number := func(lo, hi int64) {
			for j := lo; j < hi; j++ {
				evs[j].Seq, evs[j].Device = j, d.Index
			}
		}
		switch n := int64(len(evs)); {
		case o.evLo == 0 && d.Index == 0:
			// Seq and Device are already right.
		case n >= 1<<20:
			done := make(chan struct{})
			go func() { number(0, n/2); close(done) }()
			number(n/2, n)
			<-done
		default:
			number(0, n)
		}
		b.events.releaseBelow(o.evLo + o.evN)
		return evs, nil
	}
	evs := make([]trace.Event, o.evN)
	adviseHuge(evs)
	var readErr [2]error                        // of the scratch file, by the two halves of a part
	copyRange := func(lo, hi int64, half int) { // evs[lo:hi]
		for j := lo; j < hi; {
			i := o.evLo + j
			ch := b.events.chunks[i>>chunkBits][i&(1<<chunkBits-1):]
			n := min(int64(len(ch)), hi-j)
			out := evs[j : j+n]
			switch {
			case i < b.events.packed && b.events.rf != nil:
				n = min(n, b.events.packed-i)
				out = evs[j : j+n]
				if err := b.events.rf.readWide(out, i, 0, 0); err != nil {
					readErr[half] = err
					return
				}
			case i < b.events.packed:
				n = min(n, b.events.packed-i)
				out = evs[j : j+n]
				widenRecs(out, b.events.records()[i:i+n], 0, 0)
			default:
				copy(out, ch[:n])
			}
			for k := range out {
				out[k].Seq, out[k].Device = j+int64(k), d.Index
			}
			j += n
		}
	}
	const part = 16 << chunkBits // events per part
	var released int64
	for lo := int64(0); lo < o.evN; lo += part {
		hi := min(o.evN, lo+part)
		if hi-lo < 1<<chunkBits {
			copyRange(lo, hi, 0)
		} else {
			mid := lo + (hi-lo)/2
			done := make(chan struct{})
			go func() { copyRange(lo, mid, 0); close(done) }()
			copyRange(mid, hi, 1)
			<-done
		}
		if err := cmp.Or(readErr[0], readErr[1]); err != nil {
			return nil, err
		}
		// Release the chunks entirely copied (another device's run may
		// start in the last one).
		released += b.events.releaseBelow(o.evLo + hi)
		if released >= 64<<20 {
			debug.FreeOSMemory()
			released = 0
		}
	}
	return evs, nil
}
