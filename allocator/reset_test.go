package allocator

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// This file checks Reset: an allocator reset after any history must be,
// field for field, the allocator New makes (TestResetFields), and must
// then behave exactly as one (FuzzReset).

// resetCase is one FuzzReset input, decoded: a history under one family,
// then a Reset to another, and operations that the reset allocator and a
// new one must serve alike.
type resetCase struct {
	fam1, fam2 int
	hist, ops  []byte
	restore    bool // Restore the history's segments after the Reset
	sink       bool // the history reports to an EventSink, not an Observer
	total      int64
	overhead   int64
}

func decodeResetCase(data []byte) (resetCase, bool) {
	if len(data) < 4 {
		return resetCase{}, false
	}
	c := resetCase{fam1: int(data[0]) % len(fuzzFamilies), fam2: int(data[1]) % len(fuzzFamilies)}
	flags := data[3]
	c.restore, c.sink = flags&1 != 0, flags&2 != 0
	c.total = []int64{1 * gib, 2 * gib, 700 * mib, 80 * gib}[flags>>2%4]
	c.overhead = []int64{100 * mib, 0, 300 * mib, 2 * mib}[flags>>4%4]
	rest := data[4:]
	split := len(rest) * int(data[2]) / 256 / 4 * 4
	c.hist, c.ops = rest[:split], rest[split:]
	return c, true
}

func famConf(t testing.TB, fam int) Conf {
	f := fuzzFamilies[fam]
	conf, err := ParseConf(f.conf)
	if err != nil {
		t.Fatal(err)
	}
	if f.round != 0 {
		conf.MinBlockSize = f.round
	}
	return conf
}

// history makes an allocator of family fam and runs ops on it, reporting
// to an Observer or an EventSink; then resets it and runs ops again, as a
// Replayer replays: the second run takes the memory the first left (pages,
// bins of streams, page tables, pools), and must emit the same events. It
// returns the allocator and its device.
func history(t testing.TB, fam int, ops []byte, sink bool) (*Allocator, *SimDevice) {
	dev := NewSimDevice(1 * gib)
	a, err := New(famConf(t, fam), dev)
	if err != nil {
		t.Fatal(err)
	}
	var runs [2][]Event
	for i := range runs {
		if i > 0 {
			dev.Reset(1 * gib)
			if err := a.Reset(famConf(t, fam), dev); err != nil {
				t.Fatal(err)
			}
		}
		dev.ContextOverhead = 100 * mib
		a.SetMemoryLimit(fuzzFamilies[fam].limit)
		a.BriefOOMs(sink) // as a replay's, which sets a sink
		l := newLockstep(t, a)
		l.log = !sink
		if sink {
			tt, _ := t.(*testing.T) // runSink checks its contract on a T
			rs := newRunSink(tt, 0)
			a.SetEventSink(rs, rs.buf)
		}
		l.run(ops, 1500)
		runs[i] = l.all
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Fatalf("the history's events differ after a Reset:\n%v\n%v", runs[0], runs[1])
	}
	a.SkipBlockStats(sink) // as an annotating replay's, for Reset to turn off
	return a, dev
}

// runResetCase runs c: the history, then Reset against New, compared
// field by field at once and in behaviour over c.ops, then field by field
// again.
func runResetCase(t testing.TB, c resetCase) {
	a, dev := history(t, c.fam1, c.hist, c.sink)
	var segs []SegmentInfo
	if c.restore {
		segs = a.Segments()
	}
	conf := famConf(t, c.fam2)
	dev.Reset(c.total)
	dev.ContextOverhead = c.overhead
	if err := a.Reset(conf, dev); err != nil {
		t.Fatal(err)
	}
	fdev := NewSimDevice(c.total)
	fdev.ContextOverhead = c.overhead
	fresh, err := New(conf, fdev)
	if err != nil {
		t.Fatal(err)
	}
	if d := append(stateDiff(a, fresh), spareDiff(a)...); len(d) > 0 {
		t.Fatalf("reset allocator differs from a new one:\n%s", strings.Join(d, "\n"))
	}
	limit := fuzzFamilies[c.fam2].limit
	l := newLockstep(t, a, fresh)
	if c.restore && restorable(segs, c.fam1, c.fam2) {
		l.desc = "restore"
		failed := false
		l.each(-1, func(x *Allocator) string {
			err := x.Restore(segs)
			failed = err != nil
			// The devices invent addresses from where the history's did:
			// move them past the restored segments.
			x.dev.(*SimDevice).next = 1 << 52
			return errText(err)
		})
		if failed {
			return // a partial restore is undefined; both failed alike
		}
		if limit > 0 {
			// Restore ignores the limit; the invariants hold reserved
			// memory to it.
			limit = max(limit, a.Stats().ReservedBytes[0].Current)
		}
		for _, s := range segs {
			for _, b := range s.Blocks {
				switch b.State {
				case ActiveAllocated:
					l.live, l.liveH = append(l.live, b.Addr), append(l.liveH, 0)
				case ActivePendingFree:
					l.pend, l.pendH = append(l.pend, b.Addr), append(l.pendH, 0)
				}
			}
		}
	}
	for _, x := range l.as {
		x.SetMemoryLimit(limit)
	}
	l.check(-1)
	l.run(c.ops, 1500)
	if d := stateDiff(a, fresh); len(d) > 0 {
		t.Fatalf("after the same operations, the reset allocator differs from a new one:\n%s", strings.Join(d, "\n"))
	}
}

// restorable reports whether segs, a layout under family fam1, can be
// restored under fam2: Restore takes no expandable segments, and the
// blocks must be multiples of fam2's quantum (the invariants check it). A
// max_split_size that fam1 did not have may meet split oversize blocks,
// which releaseAvailable leaves alone (TestRestoreSplitOversize).
func restorable(segs []SegmentInfo, fam1, fam2 int) bool {
	c1, c2 := famConf(nil, fam1), famConf(nil, fam2)
	if c1.MinBlockSize != c2.MinBlockSize {
		return false
	}
	for _, s := range segs {
		if s.Expandable {
			return false
		}
	}
	return true
}

// FuzzReset runs a random history on an allocator, resets it to other
// settings and another device, and checks that it then serves random
// operations exactly as a new allocator does (values, errors, events,
// statistics, layout, invariants), and that both end field for field
// alike. go test runs it on the table of resetSeeds, every pair of setting
// families, and on the corpus in testdata/fuzz/FuzzReset: scenarios
// written out (a Reset inside a capture, a Restore with pending blocks,
// expandable segments before or after, an event sink, an empty history).
func FuzzReset(f *testing.F) {
	for _, s := range resetSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ok := decodeResetCase(data)
		if !ok {
			return
		}
		runResetCase(t, c)
	})
}

// lcgBytes returns n pseudo-random bytes from seed.
func lcgBytes(seed uint32, n int) []byte {
	out := make([]byte, 0, n)
	x := seed*7919 + 1
	for len(out) < n {
		x = x*1664525 + 1013904223
		out = append(out, byte(x>>24))
	}
	return out
}

// resetSeeds covers every pair of families once, the flags in turn, with
// histories of a few hundred operations.
func resetSeeds() [][]byte {
	var seeds [][]byte
	nf := len(fuzzFamilies)
	for i := range nf * nf {
		s := []byte{byte(i / nf), byte(i % nf), byte(64 + i*37%160), byte(i * 13)}
		seeds = append(seeds, append(s, lcgBytes(uint32(i), 2400)...))
	}
	return seeds
}

// TestResetFields resets allocators after histories that leave every field
// of Allocator in use, and compares each with a new allocator field by
// field (stateDiff). A field Reset forgets then shows up as a difference,
// and a field added to Allocator that no history sets fails the test: a
// history must set it, so that the comparison covers it.
func TestResetFields(t *testing.T) {
	// The fields no history need change: pages holds no state, only pages
	// to hand out (reuseOnly; spareDiff checks them), and pendPos is
	// ProcessEvents' scratch, empty between its calls.
	unchanged := map[string]bool{"pages": true, "pendPos": true}
	changed := map[string]bool{}
	for i, s := range resetSeeds() {
		c, _ := decodeResetCase(s)
		a, dev := history(t, c.fam1, c.hist, c.sink)
		for _, name := range topLevelDiff(a, c.fam2, c.total) {
			changed[name] = true
		}
		conf := famConf(t, c.fam2)
		dev.Reset(c.total)
		if err := a.Reset(conf, dev); err != nil {
			t.Fatal(err)
		}
		fresh, err := New(conf, NewSimDevice(c.total))
		if err != nil {
			t.Fatal(err)
		}
		if d := append(stateDiff(a, fresh), spareDiff(a)...); len(d) > 0 {
			t.Fatalf("seed %d: reset allocator differs from a new one:\n%s", i, strings.Join(d, "\n"))
		}
	}
	at := reflect.TypeFor[Allocator]()
	for i := range at.NumField() {
		if name := at.Field(i).Name; !changed[name] && !unchanged[name] {
			t.Errorf("no history changes Allocator.%s: Reset's handling of it is not tested", name)
		}
	}

	// The zero Allocator resets to a new one too.
	var z Allocator
	conf := famConf(t, 2)
	if err := z.Reset(conf, NewSimDevice(gib)); err != nil {
		t.Fatal(err)
	}
	fresh, _ := New(conf, NewSimDevice(gib))
	if d := stateDiff(&z, fresh); len(d) > 0 {
		t.Fatalf("zero allocator, reset, differs from a new one:\n%s", strings.Join(d, "\n"))
	}
	// A conf that is not valid leaves the allocator as it was.
	bad := conf
	bad.MinBlockSize = 3
	if err := z.Reset(bad, NewSimDevice(gib)); err == nil {
		t.Fatal("Reset accepted a conf that is not valid")
	}
	if d := stateDiff(&z, fresh); len(d) > 0 {
		t.Fatalf("a failed Reset changed the allocator:\n%s", strings.Join(d, "\n"))
	}
}
