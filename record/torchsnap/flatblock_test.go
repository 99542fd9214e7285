package torchsnap

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

// TestFlatBlocks: a snapshot's segment blocks decode to the same snapshot
// through flatBlocks as through the general path, in the real snapshots
// (whose segments hold a few blocks each, most batches bringing strings or
// frames not written before, which flatBlocks leaves to the general path)
// and in a generated one of many blocks, which flatBlocks takes nearly
// whole: frames lists of references, the one empty list PyTorch gives
// inactive blocks, and FRAME headers wherever CPython's framer may end a
// frame, between any two objects.
func TestFlatBlocks(t *testing.T) {
	files := map[string][]byte{"generated": blocksSnapshot(3, 2500)}
	for _, path := range realSnapshots(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[name(path)] = data
	}
	for name, data := range files {
		noFlatBlocks = true
		want, err := decode(bytes.NewReader(data), 0)
		noFlatBlocks = false
		if err != nil {
			t.Fatal(err)
		}
		before := flatBlocksRead.Load()
		got, err := decode(bytes.NewReader(data), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded through flatBlocks, the snapshot differs from the general path's", name)
		}
		if name != "generated" {
			continue
		}
		n := int64(0)
		for _, s := range got.Devices[0].Segments {
			n += int64(len(s.Blocks))
		}
		if flat := flatBlocksRead.Load() - before; n != 3*2500 || flat < n-1000 {
			t.Errorf("generated: flatBlocks converted %d of its %d blocks, want all but the first batch's", flat, n)
		}
	}
}

// blocksSnapshot writes a snapshot of segs segments of n blocks each, as
// CPython pickles one: the first block brings the keys, the states and the
// frames, every later one refers to them; every third block is inactive,
// with the first segment's empty frames list. FRAME headers come before
// some dicts, keys, values, frame references and APPENDS.
func blocksSnapshot(segs, n int) []byte { return blocksSnapshotRenew(segs, n, -1) }

// blocksSnapshotRenew is blocksSnapshot whose segment renew's first block
// brings frames of its own, which every later block refers to.
func blocksSnapshotRenew(segs, n, renew int) []byte { return blocksSnapshotGen(segs, n, renew, false) }

// blocksSnapshotGen is blocksSnapshotRenew; with lateInactive, the first
// segment's blocks are all active, so that the state string "inactive"
// first comes in the second segment, as in a real snapshot whose first
// segment is full.
func blocksSnapshotGen(segs, n, renew int, lateInactive bool) []byte {
	var buf bytes.Buffer
	p := newPickleWriter(&buf)
	k := 0
	frame := func(every int) {
		if k++; k%every == 0 {
			p.op(opFrame, 0, 0, 0, 0, 0, 0, 0, 0)
		}
	}
	var frames []int
	empty := -1
	const base, size = 0x7f0000000000, 1 << 12
	p.dict(func() {
		p.str("segments")
		p.list(segs, func(s int) {
			p.dict(func() {
				addr := int64(base + s*n*size)
				for _, kv := range []struct {
					k string
					v int64
				}{{"device", 0}, {"address", addr}, {"total_size", int64(n * size)}, {"allocated_size", 0},
					{"active_size", 0}, {"requested_size", 0}, {"stream", 0}} {
					p.str(kv.k)
					p.int(kv.v)
				}
				p.str("segment_type")
				p.str("large")
				p.str("frames")
				if empty < 0 {
					p.op(opEmptyList)
					empty = p.memoize()
				} else {
					p.get(empty)
				}
				p.str("blocks")
				p.op(opEmptyList)
				p.memoize()
				for i := 0; i < n; i += 1000 {
					p.op(opMark)
					for j := i; j < min(n, i+1000); j++ {
						frame(17)
						p.dict(func() {
							frame(5)
							p.str("address")
							frame(7)
							p.int(addr + int64(j*size))
							p.str("size")
							p.int(size)
							frame(11)
							p.str("requested_size")
							p.int(int64(size - j%512))
							p.str("state")
							if j%3 == 2 && (s > 0 || !lateInactive) {
								p.str("inactive")
								p.str("frames")
								p.get(empty)
								return
							}
							p.str("active_allocated")
							p.str("frames")
							p.op(opEmptyList)
							p.memoize()
							p.op(opMark)
							if frames == nil || s == renew && j == 0 {
								frames = frames[:0]
								for f := range 3 {
									frames = append(frames, p.memo)
									p.dict(func() {
										p.str("name")
										p.str("fn")
										p.str("filename")
										p.str("model.py")
										p.str("line")
										p.int(int64(10 + f))
									})
								}
							} else {
								for f := range 1 + j%3 {
									frame(13)
									p.get(frames[f])
								}
							}
							frame(19)
							p.op(opAppends)
						})
						frame(23)
					}
					p.op(opAppends)
				}
			})
		})
		p.str("device_traces")
		p.list(1, func(int) {
			p.op(opEmptyList)
			p.memoize()
		})
	})
	p.op(opStop)
	p.w.Flush()
	return buf.Bytes()
}

// FuzzFlatBlocks: whatever the bytes, decoding with flatBlocks gives what
// the general path gives: the same snapshot, or an error both ways.
func FuzzFlatBlocks(f *testing.F) {
	f.Add(blocksSnapshot(2, 1200))
	f.Add(blocksSnapshot(1, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		noFlatBlocks = true
		want, wantErr := decode(bytes.NewReader(data), 0)
		noFlatBlocks = false
		got, err := decode(bytes.NewReader(data), 0)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("through flatBlocks: error %v; through the general path: %v", err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatal("decoded through flatBlocks, the snapshot differs from the general path's")
		}
	})
}
