package torchsnap

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// entrySpec is a trace entry for snapshotOf: its keys and values in order;
// a value is an int64, a string, or a []frameSpec.
type entrySpec [][2]any

type frameSpec struct {
	file, name string
	line       []byte // the LONG1 argument of the line, little-endian
}

// snapshotOf writes a protocol-4 snapshot of one device whose trace holds
// entries, as CPython pickles one (strings and frame dicts memoized, keys
// after their first use as memo references, so that every entry past the
// first goes through the decoder's fast paths).
func snapshotOf(entries []entrySpec) []byte {
	var buf bytes.Buffer
	p := newPickleWriter(&buf)
	p.dict(func() {
		p.str("device_traces")
		p.list(1, func(int) {
			p.list(len(entries), func(i int) {
				p.dict(func() {
					for _, kv := range entries[i] {
						p.str(kv[0].(string))
						switch v := kv[1].(type) {
						case int64:
							p.int(v)
						case string:
							p.str(v)
						case []frameSpec:
							p.list(len(v), func(j int) {
								p.dict(func() {
									p.str("filename")
									p.str(v[j].file)
									p.str("name")
									p.str(v[j].name)
									p.str("line")
									p.op(opLong1, byte(len(v[j].line)))
									p.op(v[j].line...)
								})
							})
						}
					}
				})
			})
		})
	})
	p.op(opStop)
	p.w.Flush()
	return buf.Bytes()
}

func entry(action string, addr int64, frames []frameSpec) entrySpec {
	return entrySpec{{"action", action}, {"addr", addr}, {"size", int64(512)}, {"stream", int64(0)},
		{"time_us", int64(1700000000000000)}, {"frames", frames}}
}

// TestDecode_unknownLine: a frame's line may be any integer; PyTorch's
// unsigned 2^64-1 (frees during exception unwinding, torch.compile frames),
// a negative one or one past int32 is trace.UnknownLine, rendered "?".
func TestDecode_unknownLine(t *testing.T) {
	for _, c := range []struct {
		name string
		line []byte
		want int32
	}{
		{"2^64-1", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}, trace.UnknownLine},
		{"2^70", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0x40}, trace.UnknownLine},
		{"-1", []byte{0xff}, trace.UnknownLine},
		{"2^32+7", []byte{7, 0, 0, 0, 1}, trace.UnknownLine},
		{"41", []byte{41}, 41},
	} {
		t.Run(c.name, func(t *testing.T) {
			fr := []frameSpec{{"a.py", "f", c.line}, {"b.py", "g", []byte{3}}}
			// The same frames in several lists: the first entry is
			// decoded by toEvent, the others by the fast paths.
			data := snapshotOf([]entrySpec{entry("alloc", 1<<20, fr), entry("free_requested", 1<<20, fr),
				entry("alloc", 2<<20, []frameSpec{{"c.py", "h", c.line}})})
			s, err := Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			evs := s.Devices[0].Events
			for i, e := range evs {
				st := s.Stacks[e.Stack]
				if st[0].Line != c.want {
					t.Errorf("event %d: line %d, want %d", i, st[0].Line, c.want)
				}
			}
			text := trace.FormatStack(s.Stacks[evs[0].Stack])
			if c.want == trace.UnknownLine && !strings.HasPrefix(text, "f\ta.py\t?\n") {
				t.Errorf("FormatStack gives %q, want the line as ?", text)
			}
			if back := trace.ParseStack(text); back[0].Line != c.want {
				t.Errorf("ParseStack(%q) gives line %d, want %d", text, back[0].Line, c.want)
			}
			checkSpilled(t, data, s)
		})
	}
}

// TestDecode_missingAddr: an entry that must have an addr and has none is
// reported as such, by whichever path decodes it, not as a reconstruction
// error later.
func TestDecode_missingAddr(t *testing.T) {
	fr := []frameSpec{{"a.py", "f", []byte{1}}}
	noAddr := entrySpec{{"action", "alloc"}, {"size", int64(512)}, {"stream", int64(0)}, {"frames", fr}}
	for _, c := range []struct {
		name    string
		entries []entrySpec
	}{
		{"first", []entrySpec{noAddr}},
		{"later", []entrySpec{entry("alloc", 1<<20, fr), noAddr}},
		{"free", []entrySpec{entry("alloc", 1<<20, fr), {{"action", "free_requested"}, {"size", int64(512)}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(snapshotOf(c.entries)))
			if err == nil || !strings.Contains(err.Error(), "addr is missing") {
				t.Errorf("error %v, want one saying the addr is missing", err)
			}
		})
	}
	// snapshot and oom entries have none.
	ok := []entrySpec{entry("alloc", 1<<20, fr), {{"action", "snapshot"}, {"size", int64(0)}},
		{{"action", "oom"}, {"device_free", int64(5)}, {"size", int64(1 << 30)}}}
	if _, err := Decode(bytes.NewReader(snapshotOf(ok))); err != nil {
		t.Errorf("snapshot and oom entries without addr: %v", err)
	}
}

// writeEntry writes a trace entry dict with p.
func writeEntry(p *pickleWriter, e entrySpec) {
	p.dict(func() {
		for _, kv := range e {
			p.str(kv[0].(string))
			switch v := kv[1].(type) {
			case int64:
				p.int(v)
			case string:
				p.str(v)
			}
		}
	})
}

// TestDecode_sharedLists: a trace list named by two devices, an entry
// named twice, or a blocks list (or block) held by two segments is
// refused: PyTorch never shares them, and a small file that does expands
// without bound (issue 23.14: 590 KB to an 8 GB trace).
func TestDecode_sharedLists(t *testing.T) {
	e := func(i int) entrySpec {
		return entrySpec{{"action", "alloc"}, {"addr", int64(1<<20 + 512*i)}, {"size", int64(512)}, {"stream", int64(0)}}
	}
	snapshot := func(body func(p *pickleWriter)) []byte {
		var buf bytes.Buffer
		p := newPickleWriter(&buf)
		p.dict(func() { body(p) })
		p.op(opStop)
		p.w.Flush()
		return buf.Bytes()
	}
	for _, c := range []struct {
		name, want string
		data       []byte
	}{
		{"list_twice", "device_traces[1] is the same list as device_traces[0]", snapshot(func(p *pickleWriter) {
			p.str("device_traces")
			p.op(opEmptyList)
			p.memoize()
			p.op(opMark)
			l := p.list(2000, func(i int) { writeEntry(p, e(i)) })
			p.get(l)
			p.op(opAppends)
		})},
		{"entry_twice", "an entry is used more than once", snapshot(func(p *pickleWriter) {
			p.str("device_traces")
			p.list(1, func(int) {
				p.list(3000, func(i int) {
					if i < 1000 {
						writeEntry(p, e(i))
					} else {
						p.get(p.memo - 1) // the last entry's last value... or the entry
					}
				})
			})
		})},
		{"blocks_twice", "another segment holds too", snapshot(func(p *pickleWriter) {
			p.str("segments")
			var blocks int
			p.list(2, func(i int) {
				p.dict(func() {
					p.str("address")
					p.int(int64(i) << 30)
					p.str("total_size")
					p.int(2 << 20)
					p.str("blocks")
					if i == 0 {
						blocks = p.list(1, func(int) {
							p.dict(func() {
								p.str("size")
								p.int(2 << 20)
								p.str("state")
								p.str("inactive")
							})
						})
					} else {
						p.get(blocks)
					}
				})
			})
		})},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// deepSnapshot writes n trace entries, each with a new frames list of
// depth frames (in CPython's batches of 1,000) drawn from 1,100 frame
// dicts memoized once, making 4 distinct stacks, as a real snapshot of
// deep recursion does.
func deepSnapshot(n, depth int) []byte {
	var buf bytes.Buffer
	p := newPickleWriter(&buf)
	frames := make([]int, 1100)
	p.dict(func() {
		p.str("device_traces")
		p.list(1, func(int) {
			p.list(n, func(i int) {
				p.dict(func() {
					p.str("action")
					p.str("alloc")
					p.str("addr")
					p.int(int64(1<<30 + 512*i))
					p.str("size")
					p.int(512)
					p.str("frames")
					p.list(depth, func(j int) {
						f := (i%4 + j) % len(frames)
						if i > 0 || j >= len(frames) {
							p.get(frames[f])
							return
						}
						frames[f] = p.memo // the dict's MEMOIZE comes first
						p.dict(func() {
							p.str("filename")
							p.str(fmt.Sprintf("m%d.py", f%50))
							p.str("name")
							p.str(fmt.Sprintf("fn%d", f))
							p.str("line")
							p.int(int64(f))
						})
					})
				})
			})
		})
	})
	p.op(opStop)
	p.w.Flush()
	return buf.Bytes()
}

// TestDecode_deepStacks: frames lists of over 1,000 frames (several of
// CPython's APPENDS batches) are decoded as compactly as shorter ones: a
// list's items are not kept, nor even made, per trace entry. Before, each
// entry's list held 16 bytes a frame until the end of decoding.
func TestDecode_deepStacks(t *testing.T) {
	const n, depth = 1500, 2500
	data := deepSnapshot(n, depth)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := Decode(bytes.NewReader(data))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Stacks) != 4 || len(s.Devices[0].Events) != n {
		t.Fatalf("%d stacks, %d events; want 4, %d", len(s.Stacks), len(s.Devices[0].Events), n)
	}
	for i, e := range s.Devices[0].Events {
		st := s.Stacks[e.Stack]
		if len(st) != depth || st[0].Name != fmt.Sprintf("fn%d", i%4) || st[depth-1].Name != fmt.Sprintf("fn%d", (i%4+depth-1)%1100) {
			t.Fatalf("event %d: stack of %d frames from %s to %s", i, len(st), st[0].Name, st[len(st)-1].Name)
		}
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes of pickle, %d allocated", len(data), alloc)
	if limit := 3 * uint64(len(data)); alloc > limit {
		t.Errorf("decoding %d bytes allocated %d, want at most %d", len(data), alloc, limit)
	}
	checkSpilled(t, data, s)
}

// TestDecode_floods: a pickle of one opcode repeated, each of which makes
// the machine hold a value, object or list item (50 MB of DUP took 3.6 GB,
// issue 23.15), is refused early, having allocated at most twice the file
// (the event store is sized from it) and a constant, not 16 to 250 bytes
// per byte of it.
func TestDecode_floods(t *testing.T) {
	const n = 8 << 20
	for _, c := range []struct {
		name       string
		head, body string
	}{
		{"DUP", "N", "2"},
		{"NONE", "", "N"},
		{"EMPTY_DICT", "", "}"},
		{"EMPTY_LIST", "", "]"},
		{"EMPTY_TUPLE", "", ")"},
		{"MARK", "", "("},
		{"TUPLE1", "N", "\x85"},
		{"BINGET", "N\x94", "h\x00"},
		{"APPEND", "]", "Na"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := []byte("\x80\x04" + c.head + strings.Repeat(c.body, n/len(c.body)) + ".")
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Decode(bytes.NewReader(data))
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "to bound the decoder's memory") {
				t.Errorf("error %v, want a refusal", err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes, %d allocated", len(data), alloc)
			if limit := 2*uint64(len(data)) + 16<<20; alloc > limit {
				t.Errorf("decoding %d bytes allocated %d, want at most %d", len(data), alloc, limit)
			}
		})
	}
}

// TestDecode_blocksNotCopied: the block dicts of a snapshot's segments are
// kept in slabs until their segment takes them, not in one slice that
// copies them all each time it grows (a million blocks for a million live
// tensors); a segment of 200,000 blocks without addresses, read by the
// general path, moves its run to larger slabs as it grows.
func TestDecode_blocksNotCopied(t *testing.T) {
	const n = 200_000
	var buf bytes.Buffer
	p := newPickleWriter(&buf)
	p.dict(func() {
		p.str("segments")
		p.list(1, func(int) {
			p.dict(func() {
				p.str("address")
				p.int(1 << 30)
				p.str("total_size")
				p.int(n * 512)
				p.str("blocks")
				p.list(n, func(i int) {
					p.dict(func() {
						p.str("size")
						p.int(512)
						p.str("state")
						p.str("inactive")
					})
				})
			})
		})
	})
	p.op(opStop)
	p.w.Flush()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := Decode(bytes.NewReader(buf.Bytes()))
	runtime.ReadMemStats(&after)
	if err != nil || len(s.Devices) != 1 || len(s.Devices[0].Segments) != 1 || len(s.Devices[0].Segments[0].Blocks) != n {
		t.Fatalf("Decode: %v, %+v", err, s)
	}
	if per := float64(after.TotalAlloc-before.TotalAlloc) / n; per > 260 {
		// About 200 kept in chunks, 197 in slabs; 380 when one slice grew.
		t.Errorf("decoding allocated %.0f bytes a block; want at most 260", per)
	}
}

// TestDecode_blocksPerSegment: a snapshot whose segments are converted one
// at a time (JSON) reuses the room its blocks wait in, rather than making
// room for a chunk of them per segment.
func TestDecode_blocksPerSegment(t *testing.T) {
	const n = 20_000
	var buf bytes.Buffer
	buf.WriteString(`{"segments": [`)
	for i := range n {
		if i > 0 {
			buf.WriteString(", ")
		}
		fmt.Fprintf(&buf, `{"address": %d, "total_size": 2097152, "stream": 0, "segment_type": "small", "blocks": [{"size": 2097152, "state": "inactive"}]}`, (i+1)<<22)
	}
	buf.WriteString(`], "device_traces": [[]]}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := Decode(bytes.NewReader(buf.Bytes()))
	runtime.ReadMemStats(&after)
	if err != nil || len(s.Devices) != 1 || len(s.Devices[0].Segments) != n {
		t.Fatalf("Decode: %v", err)
	}
	if per := float64(after.TotalAlloc-before.TotalAlloc) / n; per > 4096 {
		t.Errorf("decoding allocated %.0f bytes a segment; want at most 4096", per)
	}
}
