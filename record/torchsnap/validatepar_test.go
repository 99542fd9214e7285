package torchsnap

import (
	"fmt"
	"github.com/tracer-dev/tracer/internal/addrmap"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// problemsText is every problem of ps with its count and examples.
func problemsText(ps []Problem) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("%s %v\n", p, p.Examples)
	}
	return s
}

// TestValidateParts: split among 2 to 8 parts, validation finds what one
// pass finds, in the same order, with the same counts and examples, on
// random traces that contradict themselves in every way Validate reports
// (blocks of several parts live in a segment that is freed among them)
// and on the repository's snapshots.
func TestValidateParts(t *testing.T) {
	const base = 0x7f00_0000_0000
	defer func(m int) { finalRangeMin = m }(finalRangeMin)
	finalRangeMin = 1 // the final state checked in ranges of its segments
	kinds := map[string]bool{}
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 1))
		d := &Device{}
		seg := func() uint64 { return base + uint64(r.IntN(4))<<21 }
		for range 3000 {
			var e trace.Event
			switch x := r.IntN(100); {
			case x < 4:
				e = trace.Event{Kind: trace.KindSegmentAlloc, Addr: seg(), Size: 2 << 20}
			case x < 7:
				e = trace.Event{Kind: trace.KindSegmentFree, Addr: seg(), Size: 2 << 20}
			case x < 8:
				e = trace.Event{Kind: trace.KindSegmentMap, Addr: seg() + 1<<20, Size: 1 << 20}
			case x < 9:
				e = trace.Event{Kind: trace.KindSegmentUnmap, Addr: seg(), Size: 1 << 20}
			default:
				k := []trace.Kind{trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted}[r.IntN(3)]
				e = trace.Event{Kind: k, Addr: seg() + uint64(r.IntN(64))*512 + uint64(r.IntN(2))<<24, Size: 512}
			}
			e.Stack, e.Seq = trace.NoStack, int64(len(d.Events))
			d.Events = append(d.Events, e)
		}
		d.Segments = nil
		for j := range 4 {
			s := Segment{Addr: base + uint64(j)*16*512, TotalSize: 16 * 512}
			for i := range 16 {
				s.Blocks = append(s.Blocks, Block{Addr: s.Addr + uint64(i)*512, Size: 512, State: []BlockState{Inactive, ActiveAllocated, ActivePendingFree}[r.IntN(3)]})
			}
			d.Segments = append(d.Segments, s)
		}
		want := d.Validate()
		for _, p := range want {
			kinds[p.Kind] = true
		}
		for parts := 2; parts <= 8; parts++ {
			if got := d.ValidateParts(0, parts, nil); problemsText(got) != problemsText(want) {
				t.Fatalf("seed %d, %d parts:\n%s\none pass:\n%s", seed, parts, problemsText(got), problemsText(want))
			}
		}
	}
	if len(kinds) < 10 {
		t.Errorf("the random traces make %d kinds of problem, want every one: %v", len(kinds), kinds)
	}
	files, _ := filepath.Glob("../../testdata/snapshots/*.pickle")
	more, _ := filepath.Glob("testdata/*.pickle")
	for _, f := range append(files, more...) {
		snap, err := ReadFile(f)
		if err != nil {
			continue // the hostile ones
		}
		for _, d := range snap.Devices {
			if _, err := d.Reconstruct(func(n int64) int64 { return n }); err != nil {
				continue
			}
			want := problemsText(d.Validate())
			for parts := 2; parts <= 5; parts += 3 {
				if got := problemsText(d.ValidateParts(0, parts, nil)); got != want {
					t.Fatalf("%s device %d, %d parts:\n%s\none pass:\n%s", f, d.Index, parts, got, want)
				}
			}
		}
	}
}

// TestValidateParts_spilled: a trace in a file is validated in the parts
// asked with the problems of one pass, on every snapshot: a spill (its
// chunks read once for them all, readShared) and packed records in a
// scratch file (read by each part); a read of a spill that fails ends the
// validation with the problems found so far and one that says so.
func TestValidateParts_spilled(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/snapshots/*.pickle")
	more, _ := filepath.Glob("testdata/*.pickle")
	checked, inScratch := 0, 0
	opens := []func(string) (*Snapshot, error){
		func(f string) (*Snapshot, error) { return Open(f, t.TempDir()) },
		func(f string) (*Snapshot, error) { return ReadFileMappedIn(f, t.TempDir()) },
	}
	for _, f := range append(files, more...) {
		for _, open := range opens {
			s, err := open(f)
			if err != nil {
				continue // the hostile ones
			}
			checked += validatesInParts(t, f, s)
			for _, d := range s.Devices {
				if d.rf != nil {
					inScratch++
				}
			}
			s.Close()
		}
	}
	if checked < 20 || runtime.GOOS == "linux" && inScratch == 0 {
		t.Fatalf("%d devices checked, %d of them with records in a scratch file", checked, inScratch)
	}
	s, err := Open("testdata/oom_p2.pickle", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := s.Devices[0]
	if _, err := d.Reconstruct(func(n int64) int64 { return n }); err != nil {
		t.Fatal(err)
	}
	s.spill.f.Close()
	got := d.ValidateParts(0, 3, nil)
	if len(got) != 1 || !strings.HasPrefix(got[0].Kind, "trace that could not be read back (") {
		t.Fatalf("spill unreadable: problems:\n%s", problemsText(got))
	}
}

// TestSpillParts: a spilled trace's parts take no more table than one
// table of its blocks (or 1 MiB): at the 75k blocks of a 20 MB snapshot,
// two parts, where partsFor allows five; at 150k, four; at 37k, whose one
// table is 1 MiB, one. A table under 1 MiB (the 260 blocks of a real
// training run's 10-25 MB snapshots) is one part's, however many are asked.
func TestSpillParts(t *testing.T) {
	for _, c := range []struct{ blocks, parts, want int }{
		{75_000, 8, 2}, {150_000, 8, 4}, {150_000, 3, 2}, {1000, 8, 1}, {260, 8, 1}, {30_000, 8, 1}, {37_000, 8, 1}, {1_000_000, 8, 8}, {300_000, 1, 1},
	} {
		got := spillParts(c.blocks, c.parts)
		if got != c.want {
			t.Errorf("%d blocks, %d parts asked: %d, want %d", c.blocks, c.parts, got, c.want)
		}
		if one := addrmap.Slots(c.blocks); got > 1 && got*addrmap.Slots(partBlocks(c.blocks, got)) > max(one, bigParts) {
			t.Errorf("%d blocks: %d parts take more than one table", c.blocks, got)
		}
	}
}

// TestCutFinal: the final state's check is cut into as many ranges as
// asked, none with more than its share of the blocks and a segment, so
// that no goroutine walks more than that.
func TestCutFinal(t *testing.T) {
	const segs, per = 100, 64
	var d []Segment
	for s := range segs {
		g := Segment{Addr: 0x7f00_0000_0000 + uint64(s)<<21}
		for i := range per {
			st := Inactive
			if (s+i)%3 != 0 {
				st = ActiveAllocated
			}
			g.Blocks = append(g.Blocks, Block{Addr: g.Addr + uint64(i)*512, State: st})
		}
		d = append(d, g)
	}
	for _, ranges := range []int{2, 3, 8, 16} {
		rs := cutFinal(d, segs*per, ranges)
		if len(rs) != ranges {
			t.Errorf("%d ranges asked: %d", ranges, len(rs))
		}
		for k, r := range rs {
			end := segs
			if k+1 < len(rs) {
				end = rs[k+1].seg
			}
			if n := (end - r.seg) * per; n > segs*per/ranges+per {
				t.Errorf("%d ranges: range %d walks %d blocks, want at most %d", ranges, k, n, segs*per/ranges+per)
			}
			if a, _ := firstLive(d[r.seg:]); k > 0 && (r.lo != a || r.lo <= rs[k-1].lo) {
				t.Errorf("%d ranges: range %d starts at %#x, its segment's first live block %#x, the range before at %#x", ranges, k, r.lo, a, rs[k-1].lo)
			}
		}
	}
	// Blocks at one address never start two ranges: three segments of one
	// block at one address make the first range (below it) and one more.
	b := []Block{{Addr: 512, State: ActiveAllocated}}
	if rs := cutFinal([]Segment{{Blocks: b}, {Blocks: b}, {Blocks: b}}, 3, 3); len(rs) != 2 {
		t.Errorf("three segments of one block at one address: %d ranges, want 2", len(rs))
	}
}

// BenchmarkValidateFinal: the validation's check of the final state after
// its 8 parts, on one walk (final) and in ranges (finalParts), for the
// seed's final state at full scale: 1,954 segments of 2,048 blocks, every
// other one live.
func BenchmarkValidateFinal(b *testing.B) {
	const segs, per, parts = 1954, 2048, 8
	d := &Device{}
	vs := make([]*validator, parts)
	for p := range vs {
		vs[p] = &validator{byKind: map[string]int{}}
	}
	for s := range segs {
		g := Segment{Addr: 0x7f00_0000_0000 + uint64(s)<<21, TotalSize: 2 << 20}
		for i := range per {
			blk := Block{Addr: g.Addr + uint64(i)*1024, Size: 1024, State: Inactive}
			if i%2 == 0 {
				blk.State = ActiveAllocated
				v := vs[partOf(blk.Addr, parts)]
				v.after = append(v.after, addrPending{addr: blk.Addr})
			}
			g.Blocks = append(g.Blocks, blk)
		}
		d.Segments = append(d.Segments, g)
	}
	heads := make([][]addrPending, parts)
	for p, v := range vs {
		heads[p] = v.after
	}
	for _, c := range []struct {
		name string
		run  func(v *validator) []Problem
	}{
		{"one", func(v *validator) []Problem { return v.final(d, mergeAfter(slices.Clone(heads)), true) }},
		{"ranges", func(v *validator) []Problem {
			for p := range vs {
				vs[p].after = heads[p]
			}
			return v.finalParts(d, vs, true)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if ps := c.run(&validator{byKind: map[string]int{}}); len(ps) != 0 {
					b.Fatal(problemsText(ps))
				}
			}
		})
	}
}

// TestPartsFor: a validation's parts take together at most a quarter more
// memory for their tables of live blocks than one table of them all, and
// one fewer would take more: fewer parts than asked where the blocks are
// a few hundred thousand (8 parts of 150k blocks took 8 MiB, one table 4)
// or where the last parts only add slots (6 of 8 at the seed's 500k
// blocks and at 1M), as many as asked where all tables are small.
func TestPartsFor(t *testing.T) {
	for _, c := range []struct{ blocks, asked, want int }{
		{1000, 8, 8}, {37_000, 8, 1}, {75_000, 8, 2}, {150_000, 8, 4}, {184_000, 8, 5},
		{300_000, 8, 7}, {500_000, 8, 6}, {1_000_000, 8, 6}, {150_000, 1, 1}, {150_000, 3, 2},
	} {
		got := partsFor(c.blocks, c.asked)
		if got != c.want {
			t.Errorf("%d blocks, %d parts asked: %d parts, want %d", c.blocks, c.asked, got, c.want)
		}
		one := addrmap.Slots(c.blocks)
		if all := got * addrmap.Slots(partBlocks(c.blocks, got)); one >= bigParts && 4*all > 5*one {
			t.Errorf("%d blocks in %d parts: tables of %d slots, one table %d", c.blocks, got, all, one)
		}
		if one >= bigParts && got > 1 && partSlots(c.blocks, got-1) < partSlots(c.blocks, got) {
			t.Errorf("%d blocks: %d parts take more than %d", c.blocks, got, got-1)
		}
	}
}

// validatesInParts checks that each device of s (from file f) that
// reconstructs is validated in the 3 parts asked with the problems of one
// pass, and returns how many it checked.
func validatesInParts(t *testing.T, f string, s *Snapshot) int {
	t.Helper()
	defer func(n int) { onePartSlots = n }(onePartSlots)
	onePartSlots = 0 // the testdata's small tables in parts too
	checked := 0
	for _, d := range s.Devices {
		if _, err := d.Reconstruct(func(n int64) int64 { return n }); err != nil {
			continue
		}
		want := problemsText(d.Validate())
		var mu sync.Mutex
		var started []int
		each := func(p int) func() {
			mu.Lock()
			started = append(started, p)
			mu.Unlock()
			return func() {}
		}
		if got := problemsText(d.ValidateParts(0, 3, each)); got != want || len(started) != 3 {
			t.Fatalf("%s device %d (records in a scratch file: %v), 3 parts asked: parts %v, problems:\n%s\none pass:\n%s", f, d.Index, d.rf != nil, started, got, want)
		}
		checked++
	}
	return checked
}

// TestFinalByLookup: where every block the trace leaves live is in the
// final state, the final check looks the final state's blocks up
// (finalByLookup) and finds what the walk beside the sorted blocks
// (finalParts) finds: pending states that differ and blocks the trace
// freed, in one part and in several; where a block live after the trace
// is not in the final state, it leaves the check to that walk.
func TestFinalByLookup(t *testing.T) {
	const base = 0x7f00_0000_0000
	defer func(b bool) { noFinalLookup = b }(noFinalLookup)
	kinds := map[string]bool{}
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 7))
		d := &Device{}
		live := map[uint64]bool{} // pending, by address, from an empty start
		for range 2000 {
			a := base + uint64(r.IntN(4))<<21 + uint64(r.IntN(256))*512
			k := []trace.Kind{trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted}[r.IntN(3)]
			switch k {
			case trace.KindAlloc:
				live[a] = false
			case trace.KindFreeRequested:
				live[a] = true
			case trace.KindFreeCompleted:
				delete(live, a)
			}
			d.Events = append(d.Events, trace.Event{Kind: k, Addr: a, Size: 512, Stack: trace.NoStack, Seq: int64(len(d.Events))})
		}
		extra := seed%3 == 0 // a block live after the trace left out of the final state
		left := false
		for j := range 4 {
			s := Segment{Addr: base + uint64(j)<<21, TotalSize: 2 << 20}
			for i := range 256 {
				a := s.Addr + uint64(i)*512
				st := Inactive
				if pending, ok := live[a]; ok {
					st = ActiveAllocated
					if pending != (r.IntN(8) == 0) { // some pending states differ
						st = ActivePendingFree
					}
					if extra && !left {
						st, left = Inactive, true
					}
				} else if r.IntN(16) == 0 {
					st = ActiveAllocated // freed by the trace, or never touched
				}
				s.Blocks = append(s.Blocks, Block{Addr: a, Size: 512, State: st})
			}
			d.Segments = append(d.Segments, s)
		}
		for parts := 1; parts <= 4; parts += 3 {
			noFinalLookup = true
			want := problemsText(d.ValidateParts(0, parts, nil))
			noFinalLookup = false
			before := finalLookups.Load()
			got := d.ValidateParts(0, parts, nil)
			if problemsText(got) != want {
				t.Fatalf("seed %d, %d parts: looked up:\n%s\nwalked:\n%s", seed, parts, problemsText(got), want)
			}
			if looked := finalLookups.Load() > before; looked == extra {
				t.Errorf("seed %d, %d parts: looked up %v with a block live after the trace outside the final state %v", seed, parts, looked, extra)
			}
			for _, p := range got {
				kinds[p.Kind] = true
			}
		}
	}
	for _, k := range []string{"block pending state differs from the final state", missingKind, "block live after the trace but not in the final state"} {
		if !kinds[k] {
			t.Errorf("no trace made %q", k)
		}
	}
}

// TestValidatePopulatesLargeTables: a part whose table of live blocks
// takes 1 MiB or more has it made resident at once, and a small one not;
// the problems are those of one pass either way.
func TestValidatePopulatesLargeTables(t *testing.T) {
	const base = 0x7f00_0000_0000
	for _, c := range []struct{ blocks, parts, want int }{{40_000, 1, 1}, {500, 1, 0}, {500, 4, 0}, {300_000, 4, 4}} {
		if got := partsFor(c.blocks, c.parts); got != c.parts {
			t.Fatalf("%d blocks: %d parts, not the %d asked", c.blocks, got, c.parts)
		}
		d := &Device{}
		s := Segment{Addr: base, TotalSize: int64(c.blocks) * 512}
		for i := range c.blocks {
			a := base + uint64(i)*512
			d.Events = append(d.Events, trace.Event{Kind: trace.KindAlloc, Addr: a, Size: 512, Stack: trace.NoStack, Seq: int64(i)})
			s.Blocks = append(s.Blocks, Block{Addr: a, Size: 512, State: ActiveAllocated})
		}
		d.Segments = []Segment{s}
		before := populatedTables.Load()
		got := problemsText(d.ValidateParts(int64(c.blocks), c.parts, nil))
		if n := int(populatedTables.Load() - before); n != c.want {
			t.Errorf("%d blocks in %d parts: %d tables populated, want %d", c.blocks, c.parts, n, c.want)
		}
		if want := problemsText(d.Validate()); got != want {
			t.Errorf("%d blocks in %d parts: problems\n%s\nwant\n%s", c.blocks, c.parts, got, want)
		}
	}
}
