package torchsnap

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// scaledSnapshot returns what testdata/scale_snapshot.py writes for the
// snapshot at path and reps repetitions (it picks reps from a size target):
// the trace of device 0 repeated, each repetition a fresh set of entry dicts
// sharing the original's frames lists, with time_us shifted so that the
// trace stays monotone; the rest of the snapshot as it is. It is written as
// CPython's pickler writes it (protocol 4: every str, list and dict
// memoized, shared objects as memo references, list and dict items in
// batches of 1000), so benchmarks of it need no file from outside the
// repository: multistream__default__seed1 ×49 is the 9 MB snapshot the
// performance notes in doc.go time. (Strings are memoized by value, where
// CPython memoizes them by identity: the few strings the original holds
// twice are written once, so the result is 0.03% smaller than the script's,
// with the same entries.)
func scaledSnapshot(tb testing.TB, path string, reps int) []byte {
	tb.Helper()
	obj, err := pickle.Load(path)
	if err != nil {
		tb.Fatalf("gopickle %s: %v", path, err)
	}
	top, ok := obj.(*types.Dict)
	if !ok {
		tb.Fatalf("%s: the top level is a %T, want a dict", path, obj)
	}
	tv, _ := top.Get("device_traces")
	traces, ok := tv.(*types.List)
	if !ok || traces.Len() == 0 {
		tb.Fatalf("%s: no device_traces", path)
	}
	orig := traces.Get(0).(*types.List)
	first := orig.Get(0).(*types.Dict).MustGet("time_us")
	last := orig.Get(orig.Len() - 1).(*types.Dict).MustGet("time_us")
	span := refInt(last) - refInt(first) + 1
	out := types.NewList()
	for r := range reps {
		for i := 0; i < orig.Len(); i++ {
			e := orig.Get(i).(*types.Dict)
			c := make(types.Dict, len(*e))
			copy(c, *e)
			for j := range c {
				if c[j].Key == "time_us" {
					c[j].Value = int(refInt(c[j].Value) + int64(r)*span)
				}
			}
			out.Append(&c)
		}
	}
	(*traces)[0] = out
	w := &objPickler{memo: map[any]int{}, out: []byte{opProto, 4}}
	w.p = &pickleWriter{w: bufio.NewWriterSize(&w.frame, 1<<16), strs: map[string]int{}}
	if err := w.obj(top); err != nil {
		tb.Fatal(err)
	}
	w.p.op(opStop)
	return w.commit(w.out, true)
}

// objPickler writes gopickle's objects as CPython's protocol-4 pickler does.
type objPickler struct {
	p     *pickleWriter
	memo  map[any]int  // lists, dicts and tuples already written, by identity
	frame bytes.Buffer // the frame being filled (through p's buffer)
	out   []byte       // the frames written
}

// commit appends the frame being filled to out, after a FRAME header, if
// force or once it holds 64 KiB, as CPython's framer does before each object
// and at the end; it returns out.
func (w *objPickler) commit(out []byte, force bool) []byte {
	w.p.w.Flush()
	if n := w.frame.Len(); n >= 64<<10 || (force && n > 0) {
		if n >= 4 {
			out = append(out, opFrame)
			out = binary.LittleEndian.AppendUint64(out, uint64(n))
		}
		out = append(out, w.frame.Bytes()...)
		w.frame.Reset()
	}
	return out
}

func (w *objPickler) obj(v any) error {
	p := w.p
	if w.frame.Len()+p.w.Buffered() >= 64<<10 {
		w.out = w.commit(w.out, false)
	}
	switch x := v.(type) {
	case nil:
		p.op(opNone)
	case bool:
		if x {
			p.op(opNewTrue)
		} else {
			p.op(opNewFalse)
		}
	case int:
		p.int(int64(x))
	case *big.Int:
		if !x.IsInt64() {
			return fmt.Errorf("int %v out of range", x)
		}
		p.int(x.Int64())
	case float64:
		var b [9]byte
		b[0] = opBinFloat
		binary.BigEndian.PutUint64(b[1:], math.Float64bits(x))
		p.op(b[:]...)
	case string:
		p.str(x)
	case *types.List:
		if idx, ok := w.memo[x]; ok {
			p.get(idx)
			return nil
		}
		p.op(opEmptyList)
		w.memo[x] = p.memoize()
		return w.batches(x.Len(), opAppend, opAppends, func(i int) error { return w.obj(x.Get(i)) })
	case *types.Dict:
		if idx, ok := w.memo[x]; ok {
			p.get(idx)
			return nil
		}
		p.op(opEmptyDict)
		w.memo[x] = p.memoize()
		return w.batches(x.Len(), opSetItem, opSetItems, func(i int) error {
			if err := w.obj((*x)[i].Key); err != nil {
				return err
			}
			return w.obj((*x)[i].Value)
		})
	case *types.Tuple:
		if idx, ok := w.memo[x]; ok {
			p.get(idx)
			return nil
		}
		n := x.Len()
		if n == 0 {
			p.op(opEmptyTuple)
			return nil
		}
		if n > 3 {
			p.op(opMark)
		}
		for i := range n {
			if err := w.obj(x.Get(i)); err != nil {
				return err
			}
		}
		if n > 3 {
			p.op(opTuple)
		} else {
			p.op(opTuple1 + byte(n-1))
		}
		w.memo[x] = p.memoize()
	default:
		return fmt.Errorf("cannot pickle a %T", v)
	}
	return nil
}

// batches writes a container's n items as CPython does: one item and the
// single-item opcode, or batches of up to 1000 between MARK and the
// multi-item opcode.
func (w *objPickler) batches(n int, one, many byte, item func(i int) error) error {
	if n == 1 {
		if err := item(0); err != nil {
			return err
		}
		w.p.op(one)
		return nil
	}
	for i := 0; i < n; i += 1000 {
		w.p.op(opMark)
		for j := i; j < min(n, i+1000); j++ {
			if err := item(j); err != nil {
				return err
			}
		}
		w.p.op(many)
	}
	return nil
}

// scaledPath is the snapshot that scaledSnapshot scales for benchmarks.
var scaledPath = filepath.Join(snapDir, "multistream__default__seed1.pickle")

// TestScaledSnapshot checks the scaled snapshot against its original: the
// same segments and stacks, and its trace repeated. With TORCHSNAP_SCALED=path
// it also writes the 9 MB one (×49), for timing `tracer import` against
// python3.
func TestScaledSnapshot(t *testing.T) {
	const reps = 3
	data := scaledSnapshot(t, scaledPath, reps)
	if path := os.Getenv("TORCHSNAP_SCALED"); path != "" {
		if err := os.WriteFile(path, scaledSnapshot(t, scaledPath, 49), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReadFile(scaledPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Devices) != len(want.Devices) || len(got.Stacks) != len(want.Stacks) {
		t.Fatalf("%d devices, %d stacks; want %d, %d", len(got.Devices), len(got.Stacks), len(want.Devices), len(want.Stacks))
	}
	g, w := got.Devices[0], want.Devices[0]
	if len(g.Events) != reps*len(w.Events) || len(g.Segments) != len(w.Segments) {
		t.Fatalf("%d events, %d segments; want %d, %d", len(g.Events), len(g.Segments), reps*len(w.Events), len(w.Segments))
	}
	span := w.Events[len(w.Events)-1].TimeUs - w.Events[0].TimeUs + 1
	for i, e := range g.Events {
		r, o := i/len(w.Events), w.Events[i%len(w.Events)]
		o.Seq, o.TimeUs = int64(i), o.TimeUs+int64(r)*span
		if e != o {
			t.Fatalf("event %d: %+v, want %+v", i, e, o)
		}
	}
}
