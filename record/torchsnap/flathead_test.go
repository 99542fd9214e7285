package torchsnap

import (
	"bytes"
	"math/rand"
	"testing"
)

// TestFlatHeadForms: trace entries whose values change form from one to
// the next (addr as LONG1 of several lengths or BININT, size and stream in
// every integer opcode, negative ones among them, time_us of several
// lengths) and whose pairs after time_us change bytes now and then
// (another compile_context, a user_metadata string written anew) decode
// as the reference reader decodes them: what flatHead learnt of an entry
// (its pairs' forms, its tail's bytes) is used only for an entry that has
// the same bytes.
func TestFlatHeadForms(t *testing.T) {
	const entries = 6000
	var buf bytes.Buffer
	p := newPickleWriter(&buf)
	rng := rand.New(rand.NewSource(3))
	ints := func(small bool) int64 {
		switch rng.Intn(7) {
		case 0:
			return int64(rng.Intn(256))
		case 1:
			return int64(256 + rng.Intn(65000))
		case 2:
			return int64(65536 + rng.Intn(1<<30))
		case 3:
			return -int64(1 + rng.Intn(1<<30))
		case 4:
			if small {
				return 0
			}
			return int64(1)<<40 + rng.Int63n(1<<40)
		case 5:
			if small {
				return 1
			}
			return -(int64(1)<<50 + rng.Int63n(1<<50))
		}
		return 512
	}
	addr, t0 := int64(139_800_000_000_000), int64(1_795_851_988_982_207)
	p.dict(func() {
		p.str("segments")
		p.list(0, nil)
		p.str("device_traces")
		p.list(1, func(int) {
			p.list(entries, func(i int) {
				p.dict(func() {
					a, tu := addr+int64(rng.Intn(1<<20))*512, t0+int64(rng.Intn(100))
					switch rng.Intn(20) {
					case 0:
						a = int64(rng.Intn(1 << 30)) // BININT
					case 1:
						a = int64(1)<<56 + a // LONG1 of 8 bytes
					case 2:
						tu = -tu
					case 3:
						tu = int64(rng.Intn(1 << 20))
					}
					p.entryHead([]string{"alloc", "free_requested", "free_completed", "segment_alloc"}[rng.Intn(4)], a, ints(false), ints(true), tu)
					p.str("compile_context")
					if rng.Intn(30) == 0 {
						p.str([]string{"ctx", "a longer context string"}[rng.Intn(2)])
					} else {
						p.op(opShortBinUni, 3, 'N', '/', 'A')
						p.memoize()
					}
					p.str("user_metadata")
					if rng.Intn(40) == 0 {
						p.op(opShortBinUni, 2, 'u', 'm')
						p.memoize()
					} else {
						p.str("")
					}
					p.str("frames")
					p.list(0, nil)
				})
			})
		})
	})
	p.op(opStop)
	if err := p.w.Flush(); err != nil {
		t.Fatal(err)
	}
	decodesAsRef(t, buf.Bytes(), entries, "varied forms")
}
