package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// reuseCase is one replay of TestReplayer's sequence.
type reuseCase struct {
	name   string
	events []trace.Event
	opts   Options
	// cut, when not 0, ends the source with an error after cut events.
	cut int
}

// reuseCases are every snapshot (the wrapped one with its reconstructed
// start) under its recorded settings, compared with the recording, and
// under other settings: a 4096-byte quantum, expandable segments, a memory
// limit under the recorded peak (OOMs), garbage collection under a limit,
// max_split_size. Then the cases a Replayer must survive: two devices,
// settings that are not valid, and a source that fails halfway.
func reuseCases(t *testing.T) []reuseCase {
	var cases []reuseCase
	for _, name := range snapshotNames(t) {
		s := loadSnapshot(t, name)
		conf, err := allocator.ParseConf(s.conf)
		if err != nil {
			t.Fatal(err)
		}
		events := s.events
		if isWrap(name) {
			events = append(reconstructStart(t, s, conf), s.events...)
			for i := range events {
				events[i].Seq = int64(i)
			}
		}
		base := Options{Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit, PrivateSegments: s.segments}
		rec := base
		rec.Recorded = true
		cases = append(cases, reuseCase{name: name + "/recorded", events: events, opts: rec})
		peak := int64(s.stats["reserved_bytes.all.peak"].(float64))
		for _, v := range []struct {
			label string
			edit  func(o *Options)
		}{
			{"round4096", func(o *Options) { o.Conf.MinBlockSize = 4096 }},
			{"expandable", func(o *Options) { o.Conf.ExpandableSegments = true }},
			{"limit", func(o *Options) { o.MemoryLimit = peak * 6 / 10 }},
			{"gc", func(o *Options) { o.Conf.GCThreshold, o.MemoryLimit = 0.5, peak*9/10 }},
			{"split20", func(o *Options) { o.Conf.MaxSplitSize = 20 << 20 }},
		} {
			if isWrap(name) && (v.label == "round4096" || v.label == "limit") {
				// The reconstructed start has 512-byte blocks and more
				// reserved than the limit: Restore installs it as it is,
				// and the invariants fail, reset or not.
				continue
			}
			o := base
			v.edit(&o)
			cases = append(cases, reuseCase{name: name + "/" + v.label, events: events, opts: o})
		}
		// The recorded run, under other settings and without the pools of
		// its private segments, compared with the recording: mismatches,
		// and recorded events left unreplayed at the end.
		o := rec
		o.Conf, o.PrivateSegments = allocator.DefaultConf(), nil
		if s.conf == "" {
			o.Conf.MinBlockSize = 1024
		}
		if !isWrap(name) { // the restored start is in 512-byte blocks
			cases = append(cases, reuseCase{name: name + "/wrong", events: events, opts: o})
		}
		if name == "multistream__default__seed1" {
			cases = append(cases, reuseCase{name: name + "/two-devices", events: twoDevices(events), opts: rec})
			o := base
			o.Conf.MinBlockSize = 3
			cases = append(cases, reuseCase{name: name + "/bad-conf", events: events, opts: o})
			cases = append(cases, reuseCase{name: name + "/cut", events: twoDevices(events), opts: rec, cut: len(events)})
		}
	}
	return cases
}

// twoDevices is evs on devices 0 and 1, interleaved in runs of a few
// events, so that each device's replay holds a free_requested across the
// other's events at times.
func twoDevices(evs []trace.Event) []trace.Event {
	var out []trace.Event
	for i := 0; i < len(evs); i += 5 {
		for d := range int32(2) {
			for _, e := range evs[i:min(i+5, len(evs))] {
				e.Device = d
				e.Seq = int64(len(out))
				out = append(out, e)
			}
		}
	}
	return out
}

// plainSource serves events one at a time, without NextBatch, and fails
// after cut events when cut is not 0.
type plainSource struct {
	evs []trace.Event
	i   int
	cut int
}

func (s *plainSource) Next() bool {
	if s.i >= len(s.evs) || s.cut > 0 && s.i >= s.cut {
		return false
	}
	s.i++
	return true
}

func (s *plainSource) Event() *trace.Event { return &s.evs[s.i-1] }

func (s *plainSource) Err() error {
	if s.cut > 0 && s.i >= s.cut {
		return errors.New("cut")
	}
	return nil
}

// reuseOutcome is what TestReplayer compares of a replay: the result of
// every device, the layout of its allocator, and the events it emitted.
type reuseOutcome struct {
	err    string
	devs   []DeviceResult
	segs   [][]allocator.SegmentInfo
	events []trace.Event
}

func replayOnce(t *testing.T, run func(context.Context, Source, Options, Observer) (*Result, error), c reuseCase, batch, observe bool) reuseOutcome {
	var src Source = &plainSource{evs: c.events, cut: c.cut}
	if batch && c.cut == 0 {
		src = NewSliceSource(c.events)
	}
	var out reuseOutcome
	var obs Observer
	if observe {
		obs = ObserverFunc(func(ev *trace.Event) { out.events = append(out.events, *ev) })
	}
	res, err := run(context.Background(), src, c.opts, obs)
	if err != nil {
		out.err = err.Error()
		return out
	}
	for _, d := range res.Devices {
		if err := d.Allocator.CheckInvariants(); err != nil {
			t.Errorf("%s: device %d: %v", c.name, d.Device, err)
		}
		// Copies: the Result of a Replayer is valid until its next Run.
		d.OOMs, d.Mismatches = slices.Clone(d.OOMs), slices.Clone(d.Mismatches)
		out.segs = append(out.segs, d.Allocator.Segments())
		d.Allocator = nil
		out.devs = append(out.devs, d)
	}
	return out
}

// TestReplayer replays every case twice in a row on one Replayer, with and
// without an observer, by batches and one event at a time, and checks each
// replay against a fresh Run's: the same error, device results (Stats,
// OOMs, mismatches, empty_cache calls, events counted, avoided OOMs),
// final layout, and emitted events.
func TestReplayer(t *testing.T) {
	cases := reuseCases(t)
	var rp Replayer
	n, mismatched := 0, 0
	for round := range 2 {
		for i, c := range cases {
			if round == 1 {
				c = cases[len(cases)-1-i] // another order: other states before each
			}
			batch, observe := (i+round)%2 == 0, (i/2+round)%2 == 0
			want := replayOnce(t, Run, c, batch, observe)
			got := replayOnce(t, rp.Run, c, batch, observe)
			label := fmt.Sprintf("round %d, %s (batch %v, observed %v)", round, c.name, batch, observe)
			if c.opts.Recorded && c.cut == 0 && want.err == "" {
				if strings.HasSuffix(c.name, "/wrong") {
					mismatched += min(want.devs[0].NumMismatches, 1)
				} else if want.devs[0].NumMismatches > 0 {
					t.Errorf("%s: the fresh replay has %d mismatches with the recording", label, want.devs[0].NumMismatches)
				}
			}
			compareOutcomes(t, label, want, got)
			if want.err != "" {
				n++
			}
		}
	}
	if n != 4 { // bad-conf and cut, twice each
		t.Errorf("%d replays failed, want 4", n)
	}
	if mismatched < 10 {
		t.Errorf("%d replays under the wrong settings differ from the recording, want 10 or more", mismatched)
	}
}

func compareOutcomes(t *testing.T, label string, want, got reuseOutcome) {
	t.Helper()
	if want.err != got.err {
		t.Fatalf("%s: error %q, reused %q", label, want.err, got.err)
	}
	if len(want.devs) != len(got.devs) {
		t.Fatalf("%s: %d devices, reused %d", label, len(want.devs), len(got.devs))
	}
	for i := range want.devs {
		w, g := &want.devs[i], &got.devs[i]
		if w.Device != g.Device || w.Stats != g.Stats || w.AvoidedOOMs != g.AvoidedOOMs || w.NumMismatches != g.NumMismatches ||
			w.EmptyCaches != g.EmptyCaches || w.Events != g.Events {
			t.Fatalf("%s: device %d: fresh %+v\nreused %+v", label, w.Device, *w, *g)
		}
		if !slices.Equal(w.OOMs, g.OOMs) {
			t.Fatalf("%s: device %d: OOMs %+v, reused %+v", label, w.Device, w.OOMs, g.OOMs)
		}
		if !slices.Equal(w.Mismatches, g.Mismatches) {
			t.Fatalf("%s: device %d: mismatches %+v, reused %+v", label, w.Device, w.Mismatches, g.Mismatches)
		}
		if !slices.EqualFunc(want.segs[i], got.segs[i], sameSegment) {
			t.Fatalf("%s: device %d: segments\n%+v\nreused\n%+v", label, w.Device, want.segs[i], got.segs[i])
		}
	}
	if !slices.Equal(want.events, got.events) {
		n := 0
		for n < min(len(want.events), len(got.events)) && want.events[n] == got.events[n] {
			n++
		}
		t.Fatalf("%s: events differ at #%d of %d and %d", label, n, len(want.events), len(got.events))
	}
}

func sameSegment(x, y allocator.SegmentInfo) bool {
	return x.Addr == y.Addr && x.Size == y.Size && x.Stream == y.Stream && x.Pool == y.Pool &&
		x.Small == y.Small && x.Expandable == y.Expandable && slices.Equal(x.Blocks, y.Blocks)
}

// TestReplayerResultReused documents the contract: the Result of a Run is
// the Replayer's, reused by its next Run.
func TestReplayerResultReused(t *testing.T) {
	s := loadSnapshot(t, "graphs__default")
	conf, _ := allocator.ParseConf(s.conf)
	var rp Replayer
	opts := Options{Conf: conf, TotalMemory: s.total, PrivateSegments: s.segments}
	r1, err := rp.Run(context.Background(), NewSliceSource(s.events), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	a1 := r1.Devices[0].Allocator
	r2, err := rp.Run(context.Background(), NewSliceSource(s.events), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r1 != r2 || a1 != r2.Devices[0].Allocator {
		t.Fatal("a Replayer made a new Result or allocator")
	}
	if n := r2.Devices[0].Events; n != int64(len(s.events)) {
		t.Fatalf("replayed %d events of %d", n, len(s.events))
	}
}
