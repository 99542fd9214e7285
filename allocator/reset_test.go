package allocator

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// This file checks Reset: an allocator reset after any history must be,
// field for field, the allocator New makes (TestResetFields), and must
// then behave exactly as one (FuzzReset).

// lockstep drives one or more allocators through the same operations,
// decoded from bytes, and checks after every step that they return the
// same values and errors, emit the same events, keep the same statistics
// and layout, and hold their invariants.
type lockstep struct {
	t     testing.TB
	as    []*Allocator
	evs   [][]Event // each allocator's events of the current step
	live  []uint64  // allocated blocks
	liveH []Handle
	pend  []uint64 // blocks freed while other streams used them
	pendH []Handle
	capt  []PoolID // open captures, innermost last
	desc  string
	log   bool    // keep allocator 0's events in all
	all   []Event // allocator 0's events, if log
}

func newLockstep(t testing.TB, as ...*Allocator) *lockstep {
	l := &lockstep{t: t, as: as, evs: make([][]Event, len(as))}
	for i := range as {
		l.observe(i)
	}
	return l
}

// observe makes allocator i report its events to l.
func (l *lockstep) observe(i int) {
	l.as[i].SetObserver(ObserverFunc(func(e *Event) { l.evs[i] = append(l.evs[i], *e) }))
}

// lockPools are the private pools the operations capture into.
var lockPools = [2]PoolID{{A: 1, B: 1}, {A: 2, B: 7}}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// each calls f on every allocator and fails unless all return the same.
func (l *lockstep) each(step int, f func(a *Allocator) string) string {
	first := ""
	for i, a := range l.as {
		got := f(a)
		if i == 0 {
			first = got
		} else if got != first {
			l.t.Fatalf("step %d (%s): allocator 0 gave %q, allocator %d %q", step, l.desc, first, i, got)
		}
	}
	return first
}

// run applies the operations of data, 4 bytes each, at most max of them.
func (l *lockstep) run(data []byte, max int) {
	for step := 0; len(data) >= 4 && step < max; step++ {
		l.step(step, data[:4])
		data = data[4:]
	}
}

func (l *lockstep) step(step int, op []byte) {
	code, b1, n := op[0]%16, op[1], int(op[2])<<8|int(op[3])
	stream := uint64(b1>>6%3) << 8
	size := func() int64 {
		switch b1 % 4 {
		case 0:
			return int64(n) + 1
		case 1:
			return int64(n)*16 + 1
		case 2:
			return int64(n) * 256
		}
		return int64(n) * 2048
	}
	pick := func(addrs []uint64) int { return n % len(addrs) }
	switch {
	case code <= 5:
		sz := size()
		if code == 5 {
			sz = int64(n) << 16 // up to 4 GiB: segments of every kind, and OOMs
		}
		l.desc = fmt.Sprintf("malloc(%d, %d)", sz, stream)
		var addr uint64
		var h Handle
		var ok bool
		l.each(step, func(a *Allocator) string {
			var err error
			addr, h, err = a.MallocHandle(sz, stream)
			ok = err == nil
			if err != nil && !IsOOM(err) {
				l.t.Fatalf("step %d (%s): %v", step, l.desc, err)
			}
			return fmt.Sprint(addr, h, errText(err))
		})
		if ok && sz > 0 {
			l.live, l.liveH = append(l.live, addr), append(l.liveH, h)
		}
	case code <= 8:
		if len(l.live) == 0 {
			return
		}
		i := pick(l.live)
		addr, h := l.live[i], l.liveH[i]
		l.desc = fmt.Sprintf("free(%#x)", addr)
		l.each(step, func(a *Allocator) string {
			if b1&1 != 0 {
				return errText(a.FreeHandle(addr, h))
			}
			return errText(a.Free(addr))
		})
		l.live, l.liveH = slices.Delete(l.live, i, i+1), slices.Delete(l.liveH, i, i+1)
	case code == 9:
		// record_stream, and the free that leaves the block pending (b1 bit
		// 1); without it the block keeps its uses while allocated.
		if len(l.live) == 0 {
			return
		}
		i := pick(l.live)
		addr, h := l.live[i], l.liveH[i]
		other := uint64(b1>>2%4)<<8 + 1
		l.desc = fmt.Sprintf("record_stream(%#x, %d)", addr, other)
		l.each(step, func(a *Allocator) string {
			if b1&1 != 0 {
				return errText(a.RecordStreamHandle(addr, h, other))
			}
			return errText(a.RecordStream(addr, other))
		})
		if b1&2 == 0 {
			return
		}
		l.desc += "+free"
		l.each(step, func(a *Allocator) string {
			return errText(a.FreeHandle(addr, h)) + fmt.Sprint(a.Pending(addr))
		})
		if l.as[0].Pending(addr) {
			l.pend, l.pendH = append(l.pend, addr), append(l.pendH, h)
		}
		l.live, l.liveH = slices.Delete(l.live, i, i+1), slices.Delete(l.liveH, i, i+1)
	case code == 10:
		l.prunePending(step)
		if len(l.pend) == 0 {
			return
		}
		i := pick(l.pend)
		addr, h := l.pend[i], l.pendH[i]
		l.desc = fmt.Sprintf("complete(%#x)", addr)
		l.each(step, func(a *Allocator) string {
			switch b1 % 3 {
			case 0:
				return errText(a.CompleteFree(addr))
			case 1:
				return errText(a.CompleteFreeHandle(addr, h))
			}
			a.MarkEventsDone(addr) // freed by the next malloc's process_events
			return ""
		})
		l.pend, l.pendH = slices.Delete(l.pend, i, i+1), slices.Delete(l.pendH, i, i+1)
	case code == 11:
		if b1&1 != 0 && len(l.capt) > 0 {
			id := l.capt[len(l.capt)-1]
			l.capt = l.capt[:len(l.capt)-1]
			l.desc = fmt.Sprintf("end capture %v", id)
			l.each(step, func(a *Allocator) string {
				a.EndAllocateToPool(id)
				if b1&2 != 0 {
					a.ReleasePool(id)
				}
				return ""
			})
			return
		}
		id := lockPools[b1>>1%2]
		l.capt = append(l.capt, id)
		l.desc = fmt.Sprintf("begin capture %v", id)
		l.each(step, func(a *Allocator) string {
			var filter func(uint64) bool
			if b1&4 == 0 {
				filter = func(s uint64) bool { return s == 0 }
			}
			a.BeginAllocateToPool(id, filter)
			return ""
		})
	case code == 12:
		l.desc = "empty_cache"
		l.each(step, func(a *Allocator) string {
			if b1&1 != 0 {
				return errText(a.EmptyPoolCache(lockPools[b1>>1%2]))
			}
			return errText(a.EmptyCache())
		})
	case code == 13:
		// No lower than what is reserved: the invariants hold reserved
		// memory to the limit.
		limit := int64(0)
		if b1&1 != 0 {
			limit = max(int64(n%1024+64)*mib, l.as[0].Stats().ReservedBytes[0].Current)
		}
		l.desc = fmt.Sprintf("limit %d", limit)
		l.each(step, func(a *Allocator) string { a.SetMemoryLimit(limit); return "" })
	case code == 14:
		l.desc = "process_events, reset_peak"
		l.each(step, func(a *Allocator) string {
			if b1&1 != 0 {
				a.ResetPeak()
			} else {
				a.ProcessEvents()
			}
			return ""
		})
	default:
		// The questions a replay asks, which must change nothing.
		sz := size()
		l.desc = fmt.Sprintf("would_reclaim(%d), block_size", sz)
		l.each(step, func(a *Allocator) string {
			out := fmt.Sprint(a.WouldReclaim(sz, stream), a.FreeCached(), a.MemoryLimit())
			if len(l.live) > 0 {
				bs, ok := a.BlockSize(l.live[pick(l.live)])
				out += fmt.Sprint(bs, ok)
			}
			return out
		})
	}
	l.check(step)
}

// prunePending drops the blocks no longer pending (a flush or
// process_events freed them).
func (l *lockstep) prunePending(step int) {
	out, outH := l.pend[:0], l.pendH[:0]
	for i, addr := range l.pend {
		if l.each(step, func(a *Allocator) string { return fmt.Sprint(a.PendingHandle(addr, l.pendH[i])) }) == "true" {
			out, outH = append(out, addr), append(outH, l.pendH[i])
		}
	}
	l.pend, l.pendH = out, outH
}

// check compares the allocators' events, statistics and layouts, and their
// invariants, after step.
func (l *lockstep) check(step int) {
	for i, a := range l.as {
		if err := a.CheckInvariants(); err != nil {
			l.t.Fatalf("allocator %d after step %d (%s): %v", i, step, l.desc, err)
		}
		if i == 0 {
			continue
		}
		if !slices.Equal(l.evs[0], l.evs[i]) {
			l.t.Fatalf("step %d (%s): events differ:\n%v\n%v", step, l.desc, l.evs[0], l.evs[i])
		}
		if s0, s := l.as[0].Stats(), a.Stats(); s0 != s {
			l.t.Fatalf("step %d (%s): stats differ:\n%+v\n%+v", step, l.desc, s0, s)
		}
		if g0, g := l.as[0].Segments(), a.Segments(); !slices.EqualFunc(g0, g, sameSegment) {
			l.t.Fatalf("step %d (%s): segments differ:\n%+v\n%+v", step, l.desc, g0, g)
		}
	}
	if l.log {
		l.all = append(l.all, l.evs[0]...)
	}
	for i := range l.evs {
		l.evs[i] = l.evs[i][:0]
	}
}

func sameSegment(x, y SegmentInfo) bool {
	return x.Addr == y.Addr && x.Size == y.Size && x.Stream == y.Stream && x.Pool == y.Pool &&
		x.Small == y.Small && x.Expandable == y.Expandable && slices.Equal(x.Blocks, y.Blocks)
}

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

// topLevelDiff names the fields of a that differ from a new allocator's of
// family fam on a device of total bytes.
func topLevelDiff(a *Allocator, fam int, total int64) []string {
	fresh, err := New(famConf(nil, fam), NewSimDevice(total))
	if err != nil {
		panic(err)
	}
	var out []string
	x, y := reflect.ValueOf(a).Elem(), reflect.ValueOf(fresh).Elem()
	for i := range x.NumField() {
		d := &differ{seen: map[[2]uintptr]bool{}}
		d.cmp(x.Field(i), y.Field(i))
		if len(d.diffs) > 0 {
			out = append(out, x.Type().Field(i).Name)
		}
	}
	return out
}

// stateDiff compares two allocators field by field, following pointers
// (PoolIDs, blocks and pools are compared by content, not identity), and
// returns the differences. Slices compare by length and content, not
// capacity; maps by their entries; functions by whether they are nil. The
// fields of reuseOnly hold memory kept for reuse, not state, and are
// skipped.
func stateDiff(a, b *Allocator) []string {
	d := &differ{seen: map[[2]uintptr]bool{}, path: []pathPart{{name: "Allocator"}}}
	d.cmp(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
	return d.diffs
}

// spareDiff checks the memory a Reset kept (the fields of reuseOnly), which
// stateDiff skips: handed out again, it must be as new memory would be.
// Pages, the bins of streams, private pools and expandable segments must be
// empty.
func spareDiff(a *Allocator) []string {
	d := &differ{seen: map[[2]uintptr]bool{}}
	sp := a.pages.spare
	if sp == nil {
		d.add("pageSlab.spare: Reset made no spare memory")
		return d.diffs
	}
	if len(a.pages.free) != len(sp.slab) {
		d.add("pageSlab: %d pages to hand out, the kept slab has %d", len(a.pages.free), len(sp.slab))
	}
	for i := range a.pages.free {
		for j := range a.pages.free[i] {
			h := &a.pages.free[i][j]
			if h.id != 0 || h.size != 0 || h.addr != 0 || h.nrest != 0 || (h.rest != nil && len(restEntries(h.rest)) != 0) {
				d.add("pageSlab: page %d holds class %d: %+v", i, j, *h)
			}
		}
	}
	for i, b := range sp.bins {
		if !reflect.ValueOf(b).Elem().IsZero() {
			d.add("spare.bins[%d]: not empty", i)
		}
	}
	for i, e := range sp.exps {
		if *e != (expSegment{}) {
			d.add("spare.exps[%d]: not empty", i)
		}
	}
	for i, s := range sp.privates {
		for _, p := range []*blockPool{s.small, s.large} {
			want := blockPool{small: p.small, idx: p.idx, owner: p.owner}
			want.blocks.slab = p.blocks.slab
			d.at(pathPart{name: fmt.Sprintf("spare.privates[%d]", i)}, reflect.ValueOf(p).Elem(), reflect.ValueOf(&want).Elem())
		}
	}
	// The leaves a kTree keeps (kTree.spare) are cleared when handed out.
	return d.diffs
}

// reuseOnly are the fields, by type and name, that hold memory a Reset
// keeps for later (nothing reads them but to hand it out again): a reset
// allocator has more there than a new one.
var reuseOnly = map[string]bool{
	"pageSlab.free":     true,
	"pageSlab.spare":    true,
	"kTree.spare":       true,
	"Allocator.pendPos": true,
}

// differ collects the differences of two values. The path to the value
// compared is a stack of parts, made into a string only for a difference:
// formatting it for every value would cost most of the comparison.
type differ struct {
	diffs []string
	seen  map[[2]uintptr]bool
	path  []pathPart
}

// pathPart is a field name or, when name is "", an index.
type pathPart struct {
	name  string
	index int
}

func (d *differ) add(format string, args ...any) {
	if len(d.diffs) >= 20 {
		return
	}
	var b strings.Builder
	for _, p := range d.path {
		if p.name != "" {
			b.WriteString(p.name)
		} else {
			fmt.Fprintf(&b, "[%d]", p.index)
		}
	}
	d.diffs = append(d.diffs, b.String()+": "+fmt.Sprintf(format, args...))
}

// at compares x and y under the path part p.
func (d *differ) at(p pathPart, x, y reflect.Value) {
	d.path = append(d.path, p)
	d.cmp(x, y)
	d.path = d.path[:len(d.path)-1]
}

func (d *differ) cmp(x, y reflect.Value) {
	switch x.Kind() {
	case reflect.Bool:
		if x.Bool() != y.Bool() {
			d.add("%v != %v", x.Bool(), y.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if x.Int() != y.Int() {
			d.add("%d != %d", x.Int(), y.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if x.Uint() != y.Uint() {
			d.add("%d != %d", x.Uint(), y.Uint())
		}
	case reflect.Float32, reflect.Float64:
		if x.Float() != y.Float() {
			d.add("%v != %v", x.Float(), y.Float())
		}
	case reflect.String:
		if x.String() != y.String() {
			d.add("%q != %q", x.String(), y.String())
		}
	case reflect.Func:
		if x.IsNil() != y.IsNil() {
			d.add("func nil %v != %v", x.IsNil(), y.IsNil())
		}
	case reflect.Pointer:
		if x.IsNil() || y.IsNil() {
			if x.IsNil() != y.IsNil() {
				d.add("nil %v != %v", x.IsNil(), y.IsNil())
			}
			return
		}
		k := [2]uintptr{x.Pointer(), y.Pointer()}
		if d.seen[k] {
			return
		}
		d.seen[k] = true
		d.cmp(x.Elem(), y.Elem())
	case reflect.Interface:
		if x.IsNil() || y.IsNil() {
			if x.IsNil() != y.IsNil() {
				d.add("nil %v != %v", x.IsNil(), y.IsNil())
			}
			return
		}
		if x.Elem().Type() != y.Elem().Type() {
			d.add("type %v != %v", x.Elem().Type(), y.Elem().Type())
			return
		}
		d.cmp(x.Elem(), y.Elem())
	case reflect.Array:
		for i := range x.Len() {
			d.at(pathPart{index: i}, x.Index(i), y.Index(i))
		}
	case reflect.Slice:
		if x.Len() != y.Len() {
			d.add("len %d != %d", x.Len(), y.Len())
			return
		}
		for i := range x.Len() {
			d.at(pathPart{index: i}, x.Index(i), y.Index(i))
		}
	case reflect.Map:
		if x.Len() != y.Len() {
			d.add("len %d != %d", x.Len(), y.Len())
			return
		}
		it := x.MapRange()
		for it.Next() {
			yv := y.MapIndex(it.Key())
			p := pathPart{name: fmt.Sprintf("[%v]", it.Key())}
			if !yv.IsValid() {
				d.path = append(d.path, p)
				d.add("missing")
				d.path = d.path[:len(d.path)-1]
				continue
			}
			d.at(p, it.Value(), yv)
		}
	case reflect.Struct:
		t := x.Type()
		if strings.HasPrefix(t.Name(), "Map[") && strings.HasSuffix(t.PkgPath(), "internal/addrmap") {
			d.cmpAddrMap(x, y)
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if reuseOnly[t.Name()+"."+f.Name] {
				continue
			}
			p := pathPart{name: "." + f.Name}
			if t == reflect.TypeFor[bin]() && f.Name == "rest" {
				// Made on first need and kept when the class empties
				// (and when a Reset empties it): nil is an empty rest.
				d.at(p, restOf(x.Field(i)), restOf(y.Field(i)))
				continue
			}
			d.at(p, x.Field(i), y.Field(i))
		}
	default:
		panic(fmt.Sprintf("stateDiff: kind %v not handled", x.Kind()))
	}
}

// restOf is a bin's rest as a slice in descending order, nil when it was
// never made.
func restOf(v reflect.Value) reflect.Value {
	if v.IsNil() {
		return reflect.ValueOf([]sEntry(nil))
	}
	return reflect.ValueOf(restEntries((*restBuf)(v.UnsafePointer())))
}

// cmpAddrMap compares two addrmap.Maps by their entries: their tables may
// differ in size (a Clear keeps the table), and the order of their slots
// with it.
func (d *differ) cmpAddrMap(x, y reflect.Value) {
	entries := func(m reflect.Value) map[uint64]reflect.Value {
		out := map[uint64]reflect.Value{}
		slots := m.FieldByName("slots")
		for i := range slots.Len() {
			s := slots.Index(i)
			if k := s.FieldByName("key").Uint(); k != 0 {
				out[k] = s.FieldByName("val")
			}
		}
		return out
	}
	for _, f := range []string{"n", "hasZ", "zero"} {
		d.at(pathPart{name: "." + f}, x.FieldByName(f), y.FieldByName(f))
	}
	ex, ey := entries(x), entries(y)
	if len(ex) != len(ey) {
		d.add("%d entries != %d", len(ex), len(ey))
		return
	}
	for k, v := range ex {
		w, ok := ey[k]
		p := pathPart{name: fmt.Sprintf("[%#x]", k)}
		if !ok {
			d.path = append(d.path, p)
			d.add("missing")
			d.path = d.path[:len(d.path)-1]
			continue
		}
		d.at(p, v, w)
	}
}
