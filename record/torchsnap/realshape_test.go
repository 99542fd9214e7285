package torchsnap

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"testing"
)

// writeRealShaped writes a snapshot of n trace entries shaped as those of
// a real training run recorded with python stacks (the 9.6 MB real10 the
// import's figures use; about 85 bytes an entry): keys in PyTorch's order
// (action, addr, size, stream, time_us, compile_context, user_metadata,
// frames), compile_context's "N/A" written and memoized anew in every
// entry as CPython does, and a frames list that is new and empty, new with
// references to frame dicts (one of 40 stacks of 6 to 18 frames, each
// frame written inline the first time), or a reference to the list of the
// allocation an entry frees. Allocations are freed in random order; the
// segments are left empty (nothing here reconstructs the state).
func writeRealShaped(w io.Writer, n int) (int, error) {
	p := newPickleWriter(w)
	rng := rand.New(rand.NewSource(10))
	frameSlot := map[[2]int]int{} // stack and frame → its dict's memo slot
	stacks := make([][]int, 40)
	for s := range stacks {
		st := make([]int, 6+rng.Intn(13))
		for j := range st {
			st[j] = rng.Intn(200)
		}
		stacks[s] = st
	}
	type live struct {
		addr, size int64
		list       int // the frames list's memo slot
	}
	var lives []live
	fresh := 0 // entries that write a frame dict
	t := int64(1795851988982207)
	entry := func(action string, addr, size int64, frames func()) {
		p.dict(func() {
			p.entryHead(action, addr, size, 0, t)
			t += int64(1 + rng.Intn(40))
			p.str("compile_context")
			p.op(opShortBinUni, 3, 'N', '/', 'A')
			p.memoize()
			p.str("user_metadata")
			p.str("")
			p.str("frames")
			frames()
		})
	}
	p.dict(func() {
		p.str("segments")
		p.list(0, nil)
		p.str("device_traces")
		p.list(1, func(int) {
			var freeing *live // freed by free_requested, for free_completed next
			p.list(n, func(i int) {
				if l := freeing; l != nil {
					// A frames list of its own, empty.
					entry("free_completed", l.addr, l.size, func() { p.list(0, nil) })
					freeing = nil
					return
				}
				if len(lives) > 64 || len(lives) > 0 && rng.Intn(3) == 0 {
					k := rng.Intn(len(lives))
					l := lives[k]
					lives[k] = lives[len(lives)-1]
					lives = lives[:len(lives)-1]
					entry("free_requested", l.addr, l.size, func() { p.get(l.list) })
					freeing = &l
					return
				}
				size := int64(512 << rng.Intn(14))
				addr := 0x7f2e00000000 + int64(i)<<20
				var slot int
				entry("alloc", addr, size, func() {
					k := rng.Intn(len(stacks))
					st := stacks[k]
					if _, ok := frameSlot[[2]int{k, 0}]; !ok {
						fresh++
					}
					slot = p.list(len(st), func(j int) {
						f := st[j]
						if s, ok := frameSlot[[2]int{k, j}]; ok {
							p.get(s)
							return
						}
						frameSlot[[2]int{k, j}] = p.memo
						p.dict(func() {
							p.str("filename")
							p.str(fmt.Sprintf("/src/model/layer%d.py", f%17))
							p.str("line")
							p.int(int64(10 + f*7))
							p.str("name")
							p.str(fmt.Sprintf("forward_%d", f))
						})
					})
				})
				lives = append(lives, live{addr, size, slot})
			})
		})
	})
	p.op(opStop)
	return fresh, p.w.Flush()
}

// TestRealShapedFastPath: the trace entries of a real-shaped snapshot
// (writeRealShaped) decode as the reference reader decodes them, and all
// but the few whose frames list writes a frame dict for the first time
// take flatEvent's path with all their pairs converted by flatHead; an
// entry that leaves it (to flatEvent's loop, flatDict or the generic
// opcodes) fails this test.
func TestRealShapedFastPath(t *testing.T) {
	const entries = 20000
	var buf bytes.Buffer
	fresh, err := writeRealShaped(&buf, entries)
	if err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	decodesAsRef(t, data, entries, "real-shaped")

	u := newUnpickler(bytes.NewReader(data), newBuilder())
	if _, err := u.run(); err != nil {
		t.Fatal(err)
	}
	// The entries whose frames list writes its stack's frame dicts (the
	// first of each stack) are left to flatDict and the generic opcodes:
	// a dozen opcodes and a list each.
	if u.headShort > fresh {
		t.Errorf("%d entries left flatHead before their last pair, want at most %d", u.headShort, fresh)
	}
	if u.slow > 12*fresh {
		t.Errorf("%d opcodes through loop's general path, want at most %d", u.slow, 12*fresh)
	}
	if n := u.b.lists.n; n > int64(fresh)+10 {
		t.Errorf("%d lists made, want at most %d", n, fresh+10)
	}
}
