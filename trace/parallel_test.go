package trace_test

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// aheadTrace writes a trace of n events in batches of 100, a new stack
// added before every 70th event (so most batches bring a dictionary
// delta), and returns its path.
func aheadTrace(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ahead.arrows")
	w, err := trace.Create(path, meta(), trace.WriterOptions{BatchRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	evs := sample(w, n)
	for i := range evs {
		if i%70 == 0 {
			evs[i].Stack = w.AddStack(trace.Stack{{Name: fmt.Sprint("f", i), File: "a.py", Line: int32(i)}})
		}
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// readAll reads path's events (each with its stack as Stacks gave it when
// the event was read), with workers decoding ahead when workers > 0, and
// reports whether they did and how many batches they decoded.
func readAll(t *testing.T, path string, workers int) (evs []trace.Event, stacks []trace.Stack, err error, cut, ahead bool, decoded, plain int) {
	t.Helper()
	rd, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if workers > 0 {
		ahead = rd.DecodeAhead(workers, true)
	}
	var ev trace.Event
	for rd.NextTo(&ev) {
		evs = append(evs, ev)
		var st trace.Stack
		if ev.Stack != trace.NoStack {
			tab := rd.Stacks()
			if int(ev.Stack) >= len(tab) {
				t.Fatalf("event %d: stack %d, table of %d", len(evs)-1, ev.Stack, len(tab))
			}
			st = tab[ev.Stack]
		}
		stacks = append(stacks, st)
	}
	_, decoded, plain = rd.DecodeCPU()
	return evs, stacks, rd.Err(), rd.Truncated(), ahead, decoded, plain
}

// TestDecodeAhead: a trace read with workers decoding its record batches
// gives the events, stacks, error and truncation of a plain read, the
// workers decoding every batch; a trace whose messages are not whole is
// read plainly; one whose batch is corrupt fails where the plain read does.
func TestDecodeAhead(t *testing.T) {
	const n = 2345 // 24 batches
	path := aheadTrace(t, n)
	want, wantStacks, _, _, _, _, _ := readAll(t, path, 0)
	if len(want) != n {
		t.Fatalf("plain read: %d events of %d", len(want), n)
	}
	for _, workers := range []int{2, 3, 8} {
		got, gotStacks, err, cut, ahead, decoded, plain := readAll(t, path, workers)
		if !ahead || decoded != 24 || plain != 0 {
			t.Errorf("%d workers: ahead %v, %d batches decoded by them, %d as the plain Reader does; want true, 24, 0", workers, ahead, decoded, plain)
		}
		if err != nil || cut || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotStacks, wantStacks) {
			t.Errorf("%d workers: %d events (err %v, cut %v), not the plain read's %d", workers, len(got), err, cut, len(want))
		}
	}

	// ReadEvents in runs across the chunks, with workers and without.
	for _, workers := range []int{0, 3} {
		rd, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		rd.DecodeAhead(workers, false)
		var got []trace.Event
		buf := make([]trace.Event, 777)
		for k := rd.ReadEvents(buf); k > 0; k = rd.ReadEvents(buf) {
			got = append(got, buf[:k]...)
		}
		if rd.Err() != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ReadEvents, %d workers: %d events (%v), not the plain read's %d", workers, len(got), rd.Err(), len(want))
		}
		rd.Close()
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the 11th batch: no workers, the plain read's events.
	cutPath := filepath.Join(t.TempDir(), "cut.arrows")
	if err := os.WriteFile(cutPath, data[:len(data)*11/24], 0o644); err != nil {
		t.Fatal(err)
	}
	plain, _, perr, pcut, _, _, _ := readAll(t, cutPath, 0)
	got, _, err, cut, ahead, _, _ := readAll(t, cutPath, 4)
	if ahead || !pcut || !cut || perr != nil || err != nil || !reflect.DeepEqual(got, plain) {
		t.Errorf("cut trace: ahead %v, %d events (cut %v, err %v); plain %d (cut %v, err %v)", ahead, len(got), cut, err, len(plain), pcut, perr)
	}

	// A stack index out of range in the 15th batch: the same events, then
	// the same error.
	bad := append([]byte(nil), data...)
	at := batchBody(t, bad, 14)
	binary.LittleEndian.PutUint32(bad[at:], 1<<30)
	badPath := filepath.Join(t.TempDir(), "bad.arrows")
	if err := os.WriteFile(badPath, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	plain, _, perr, _, _, _, _ = readAll(t, badPath, 0)
	got, _, err, _, ahead, _, fell := readAll(t, badPath, 3)
	if fell != 1 {
		t.Errorf("corrupt batch: %d batches decoded as the plain Reader does, want 1", fell)
	}
	if !ahead || perr == nil || err == nil || err.Error() != perr.Error() || !reflect.DeepEqual(got, plain) || len(got) != 1400 {
		t.Errorf("corrupt batch: ahead %v, %d events, err %v; plain %d events, err %v", ahead, len(got), err, len(plain), perr)
	}
}

// batchBody returns the offset in data of record batch b's stack indices
// (its 20th buffer: two for each column before), walking the stream's
// messages.
func batchBody(t *testing.T, data []byte, b int) int {
	t.Helper()
	off := 0
	for off+8 <= len(data) {
		mlen := int(binary.LittleEndian.Uint32(data[off+4:]))
		if mlen == 0 {
			break
		}
		meta := data[off+8 : off+8+mlen]
		typ, body := trace.MessageHeader(meta)
		if typ == 3 {
			if b == 0 {
				return off + 8 + mlen + int(trace.BufferAt(meta, 19))
			}
			b--
		}
		off += 8 + mlen + int(body)
	}
	t.Fatalf("no record batch %d", b)
	return 0
}

// TestDecodeAheadCorrupt: a trace with a byte changed anywhere, or cut
// anywhere, reads with workers as it reads plainly: the same events, the
// same error, the same truncation.
func TestDecodeAheadCorrupt(t *testing.T) {
	path := aheadTrace(t, 1234)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(7))
	dir := t.TempDir()
	for i := range 300 {
		bad := append([]byte(nil), data...)
		what := "cut"
		if i%4 != 0 {
			at := rng.Intn(len(bad))
			bad[at] ^= byte(1 + rng.Intn(255))
			what = fmt.Sprintf("byte %d", at)
		} else {
			bad = bad[:rng.Intn(len(bad))]
		}
		p := filepath.Join(dir, fmt.Sprint(i, ".arrows"))
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := trace.Open(p); err != nil {
			continue // no schema: nothing to decode ahead
		}
		want, wantStacks, werr, wcut, _, _, _ := readAll(t, p, 0)
		got, gotStacks, gerr, gcut, _, _, _ := readAll(t, p, 3)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || wcut != gcut || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotStacks, wantStacks) {
			t.Errorf("%s: with workers %d events (err %v, cut %v); plainly %d (err %v, cut %v)", what, len(got), gerr, gcut, len(want), werr, wcut)
		}
	}
}

// TestDecodeAheadStacky: a trace whose dictionaries are most of its bytes
// (a new deep stack on every event) is read by one Reader, not by workers
// that would each keep its stack table.
func TestDecodeAheadStacky(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stacky.arrows")
	w, err := trace.Create(path, meta(), trace.WriterOptions{BatchRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		st := make(trace.Stack, 20)
		for j := range st {
			st[j] = trace.Frame{Name: fmt.Sprint("frame_", i, "_", j), File: "deep.py", Line: int32(j)}
		}
		ev := trace.Event{Kind: trace.KindAlloc, Addr: uint64(i) * 512, Size: 512, Stack: w.AddStack(st)}
		if err := w.Write(&ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want, _, _, _, _, _, _ := readAll(t, path, 0)
	got, _, err, _, ahead, _, _ := readAll(t, path, 3)
	if ahead || err != nil || !reflect.DeepEqual(got, want) || len(got) != 300 {
		t.Errorf("stacky trace: ahead %v, %d events (%v); want no workers and the plain read's %d", ahead, len(got), err, len(want))
	}
}
