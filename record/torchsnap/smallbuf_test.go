package torchsnap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestReadBufFor: a read buffer is as long as before for an unknown or
// large input, and one byte longer than a small one (minReadBuf at least).
func TestReadBufFor(t *testing.T) {
	for _, c := range []struct {
		size int64
		most int
		want int
	}{
		{0, readBuf, readBuf}, {-1, readBuf, readBuf}, {1 << 30, readBuf, readBuf},
		{readBuf, readBuf, readBuf}, {readBuf - 1, readBuf, readBuf},
		{7453, readBuf, 7454}, {10, readBuf, minReadBuf}, {100_000, 64 << 10, 64 << 10},
		{9_602_005, readBuf, readBuf},
	} {
		if got := readBufFor(c.size, c.most); got != c.want {
			t.Errorf("readBufFor(%d, %d) = %d, want %d", c.size, c.most, got, c.want)
		}
	}
}

// TestSpillRecs: a spill buffers spillChunk records for an unknown or
// large file, as before, and no more than a small file's size can hold
// trace entries (spillMin at least).
func TestSpillRecs(t *testing.T) {
	for _, c := range []struct {
		size int64
		want int
	}{
		{0, spillChunk}, {-1, spillChunk}, {9_602_005, spillChunk}, {72_212_405, spillChunk},
		{spillChunk * spillEntryBytes, spillChunk}, {7453, 7453 / spillEntryBytes}, {100, spillMin},
	} {
		if got := spillRecs(c.size); got != c.want {
			t.Errorf("spillRecs(%d) = %d, want %d", c.size, got, c.want)
		}
	}
	// A spill makes its buffers as it fills them: one for events that fit
	// in it, spillBuffers at most for many; either reads back what it was
	// given.
	for _, c := range []struct {
		size         int64
		events       int
		least, most  int
		bufferedRecs int
	}{
		{7453, 60, 1, 1, 7453 / spillEntryBytes},
		{7453, 20 * (7453 / spillEntryBytes), 2, spillBuffers, 7453 / spillEntryBytes},
		{0, 5 * spillChunk, 2, spillBuffers, spillChunk},
	} {
		sp, err := newSpill(t.TempDir(), nil, c.size)
		if err != nil {
			t.Fatal(err)
		}
		if got := cap(sp.buf); got != c.bufferedRecs {
			t.Errorf("a spill for a file of %d bytes buffers %d records, want %d", c.size, got, c.bufferedRecs)
		}
		for i := range c.events {
			sp.add(&cev{TimeUs: int64(i), Addr: uint64(i) << 9, Size: 512, Kind: 1})
		}
		if err := sp.finish(); err != nil {
			t.Fatal(err)
		}
		if sp.made < c.least || sp.made > c.most {
			t.Errorf("a spill of %d events (file of %d bytes) made %d buffers, want %d to %d", c.events, c.size, sp.made, c.least, c.most)
		}
		back := make([]cev, c.events)
		if err := sp.readAt(back, 0); err != nil {
			t.Fatal(err)
		}
		for i := range back {
			if back[i].TimeUs != int64(i) || back[i].Addr != uint64(i)<<9 || back[i].Seq != int64(i) {
				t.Fatalf("a spill of %d events reads back event %d as %+v", c.events, i, back[i])
			}
		}
		sp.close()
	}
}

// TestSizedBuffersDecodeAlike: a small snapshot decoded through buffers
// sized for it (its size given) gives what one decoded through the
// full-sized buffers (size unknown) gives, whole, cut short anywhere, or
// with an argument longer than its buffer: the same snapshot or the same
// error, at the same offset. A spilled decode through its small buffers
// reads back the same events.
func TestSizedBuffersDecodeAlike(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/snapshots/*.pickle")
	if len(files) == 0 {
		t.Fatal("no snapshots in ../../testdata/snapshots")
	}
	var inputs [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 64<<10 {
			continue
		}
		inputs = append(inputs, data)
		for _, cut := range []int{len(data) / 3, len(data) / 2, len(data) - 1} {
			inputs = append(inputs, data[:cut])
		}
	}
	// A BINUNICODE whose length is past the input's end, within and past
	// readBuf, and a text opcode (INT) whose line has no end.
	for _, n := range []uint32{5000, readBuf - 10, readBuf + 10} {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], n)
		inputs = append(inputs, append([]byte{opProto, 4, opBinUnicode}, append(b[:], "abc"...)...))
	}
	inputs = append(inputs, []byte("\x80\x04I12345"))
	for i, data := range inputs {
		want, wantErr := decode(bytes.NewReader(data), 0)
		got, gotErr := decode(bytes.NewReader(data), int64(len(data)))
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("input %d (%d bytes): error %v through sized buffers, %v through full ones", i, len(data), gotErr, wantErr)
			continue
		}
		if wantErr == nil && !reflect.DeepEqual(got.Devices, want.Devices) {
			t.Errorf("input %d (%d bytes): other devices through sized buffers", i, len(data))
		}
	}
	if len(inputs) < 10 {
		t.Fatalf("only %d inputs", len(inputs))
	}
	data := inputs[0]
	mem, err := decode(bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	checkSpilled(t, data, mem)
}
