package torchsnap

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"testing"
)

// pickleWriter writes the pickle subset CPython's protocol-4 pickler emits for
// a snapshot: every str, dict and list memoized, repeated objects as BINGET.
type pickleWriter struct {
	w    *bufio.Writer
	memo int
	strs map[string]int
}

func newPickleWriter(w io.Writer) *pickleWriter {
	p := &pickleWriter{w: bufio.NewWriterSize(w, 1<<16), strs: map[string]int{}}
	p.w.Write([]byte{opProto, 4})
	return p
}

func (p *pickleWriter) memoize() int {
	p.w.WriteByte(opMemoize)
	p.memo++
	return p.memo - 1
}

func (p *pickleWriter) get(idx int) {
	if idx < 256 {
		p.w.Write([]byte{opBinGet, byte(idx)})
		return
	}
	var b [5]byte
	b[0] = opLongBinGet
	binary.LittleEndian.PutUint32(b[1:], uint32(idx))
	p.w.Write(b[:])
}

// str writes s, or a reference to the first time it was written: the
// allocator's strings are shared Python objects, as in real snapshots.
func (p *pickleWriter) str(s string) {
	if idx, ok := p.strs[s]; ok {
		p.get(idx)
		return
	}
	if len(s) < 256 {
		p.w.Write([]byte{opShortBinUni, byte(len(s))})
	} else {
		var b [5]byte
		b[0] = opBinUnicode
		binary.LittleEndian.PutUint32(b[1:], uint32(len(s)))
		p.w.Write(b[:])
	}
	p.w.WriteString(s)
	p.strs[s] = p.memoize()
}

func (p *pickleWriter) int(n int64) {
	switch {
	case n >= 0 && n < 256:
		p.w.Write([]byte{opBinInt1, byte(n)})
	case n >= 0 && n < 65536:
		p.w.Write([]byte{opBinInt2, byte(n), byte(n >> 8)})
	case n >= math.MinInt32 && n <= math.MaxInt32:
		var b [5]byte
		b[0] = opBinInt
		binary.LittleEndian.PutUint32(b[1:], uint32(n))
		p.w.Write(b[:])
	default:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		k := 8
		for k > 1 && ((b[k-1] == 0 && b[k-2]&0x80 == 0) || (b[k-1] == 0xff && b[k-2]&0x80 != 0)) {
			k--
		}
		p.w.Write([]byte{opLong1, byte(k)})
		p.w.Write(b[:k])
	}
}

func (p *pickleWriter) op(b ...byte) { p.w.Write(b) }

// entryHead writes the pairs a trace entry starts with, in PyTorch's order.
func (p *pickleWriter) entryHead(action string, addr, size, stream, t int64) {
	p.str("action")
	p.str(action)
	p.str("addr")
	p.int(addr)
	p.str("size")
	p.int(size)
	p.str("stream")
	p.int(stream)
	p.str("time_us")
	p.int(t)
}

// dict writes {k: v} for the pairs that fn emits (key then value each).
func (p *pickleWriter) dict(fn func()) {
	p.op(opEmptyDict)
	p.memoize()
	p.op(opMark)
	fn()
	p.op(opSetItems)
}

// list writes a list of n items emitted by item(i), batched by 1000 as CPython does.
func (p *pickleWriter) list(n int, item func(i int)) int {
	p.op(opEmptyList)
	idx := p.memoize()
	for i := 0; i < n; i += 1000 {
		p.op(opMark)
		for j := i; j < min(n, i+1000); j++ {
			item(j)
		}
		p.op(opAppends)
	}
	return idx
}

// writeSyntheticSnapshot writes a deterministic snapshot of about n trace
// entries: allocations packed in 1 MiB slots of one big segment, freed in
// random order, on two streams, with a few hundred distinct stacks shared as
// real ones are. Its end state matches its trace.
func writeSyntheticSnapshot(w io.Writer, n int) error {
	const (
		slots = 1024
		slot  = 1 << 20
		base  = 0x7f0000000000
		side  = 0x5a5a5a5a5a50
	)
	rng := rand.New(rand.NewSource(1))
	p := newPickleWriter(w)
	type live struct {
		req    int64
		stream int64
		stack  int
	}
	lives := make([]*live, slots)
	stackMemo := map[int]int{}
	frames := func(id int) {
		if idx, ok := stackMemo[id]; ok {
			p.get(idx)
			return
		}
		depth := 6 + id%10
		stackMemo[id] = p.list(depth, func(i int) {
			p.dict(func() {
				p.str("name")
				p.str(fmt.Sprintf("fn_%d_%d", id%37, i))
				p.str("filename")
				p.str(fmt.Sprintf("site-packages/torch/module_%d.py", (id+i)%23))
				p.str("line")
				p.int(int64(100 + (id*7+i*13)%900))
			})
		})
	}
	t := int64(1795280419000000)
	batch := 0
	entry := func(action string, addr, size, stream int64, stack int) {
		if batch == 1000 { // CPython's batching of list items
			p.op(opAppends, opMark)
			batch = 0
		}
		batch++
		t += int64(rng.Intn(50))
		p.dict(func() {
			p.entryHead(action, addr, size, stream, t)
			p.str("compile_context")
			p.str("N/A")
			p.str("user_metadata")
			p.str("")
			if stack >= 0 {
				p.str("frames")
				frames(stack)
			}
		})
	}
	// The end state, computed by running the same random sequence twice:
	// first to know the final blocks (written first, as PyTorch does), then for the trace.
	script := func(emit bool) {
		r := rand.New(rand.NewSource(2))
		for i := range lives {
			lives[i] = nil
		}
		if emit {
			entry("segment_alloc", base, slots*slot, 0, 0)
		}
		for k := 1; k < n; {
			s := r.Intn(slots)
			if b := lives[s]; b != nil {
				if emit {
					entry("free_requested", base+int64(s)*slot, b.req, b.stream, b.stack)
					entry("free_completed", base+int64(s)*slot, b.req, b.stream, b.stack)
				}
				lives[s] = nil
				k += 2
				continue
			}
			b := &live{req: 512 + int64(r.Intn(slot-512)), stack: r.Intn(400)}
			if r.Intn(10) < 3 {
				b.stream = side
			}
			if emit {
				entry("alloc", base+int64(s)*slot, b.req, b.stream, b.stack)
			}
			lives[s] = b
			k++
		}
	}
	script(false)
	final := append([]*live(nil), lives...)
	p.dict(func() {
		p.str("segments")
		p.list(1, func(int) {
			p.dict(func() {
				var alloc, req int64
				for _, b := range final {
					if b != nil {
						alloc += slot
						req += b.req
					}
				}
				for _, kv := range []struct {
					k string
					v int64
				}{{"device", 0}, {"address", base}, {"total_size", slots * slot}, {"allocated_size", alloc},
					{"active_size", alloc}, {"requested_size", req}, {"stream", 0}} {
					p.str(kv.k)
					p.int(kv.v)
				}
				p.str("segment_type")
				p.str("large")
				p.str("segment_pool_id")
				p.int(0)
				p.int(0)
				p.op(opTuple2)
				p.memoize()
				p.str("is_expandable")
				p.op(opNewFalse)
				p.str("frames")
				frames(0)
				p.str("blocks")
				p.list(slots, func(i int) {
					p.dict(func() {
						b := final[i]
						p.str("address")
						p.int(base + int64(i)*slot)
						p.str("size")
						p.int(slot)
						p.str("requested_size")
						if b == nil {
							p.int(0)
							p.str("state")
							p.str("inactive")
							p.str("frames")
							p.list(0, nil)
							return
						}
						p.int(b.req)
						p.str("state")
						p.str("active_allocated")
						p.str("frames")
						frames(b.stack)
					})
				})
			})
		})
		p.str("device_traces")
		p.list(1, func(int) {
			p.op(opEmptyList)
			p.memoize()
			p.op(opMark)
			script(true)
			p.op(opAppends)
		})
	})
	p.op(opStop)
	return p.w.Flush()
}

// TestSyntheticSnapshot: the generator's output is a valid, consistent
// snapshot (so benchmarks measure a realistic file). With
// TORCHSNAP_GEN=path and TORCHSNAP_GEN_EVENTS=n it also writes one, for
// timing against python3 and `tracer import`.
func TestSyntheticSnapshot(t *testing.T) {
	path := os.Getenv("TORCHSNAP_GEN")
	n := 20000
	if path != "" {
		fmt.Sscan(os.Getenv("TORCHSNAP_GEN_EVENTS"), &n)
	} else {
		path = t.TempDir() + "/synthetic.pickle"
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSyntheticSnapshot(f, n); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if testing.Short() || n > 100000 {
		return
	}
	s, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := s.Devices[0]
	if len(d.Events) < n-1 || len(d.Events) > n+1 {
		t.Errorf("%d events, want about %d", len(d.Events), n)
	}
	sameSnapshot(t, s, refDecode(t, path))
	if initial := checkReconstruction(t, d); len(initial) != 0 {
		t.Errorf("%d initial events for a complete trace", len(initial))
	}
	for _, p := range d.Validate() {
		t.Error(p)
	}
}
