package replay

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// TestSkipStatsSame: a replay that skips the statistics (Options.SkipStats)
// decides everything as one that keeps them: the same results but for the
// statistics, the same final segments and the same annotated events, on
// every real snapshot under its recorded settings, under expandable
// segments, and under a limit that makes the replay fail requests.
func TestSkipStatsSame(t *testing.T) {
	run := func(evs []trace.Event, o Options, skip bool) ([]DeviceResult, []trace.Event, [][]allocator.SegmentInfo, error) {
		in := slices.Clone(evs)
		numberInParts(in, 1, 1024)
		o.SkipStats = skip
		res, err := Run(context.Background(), NewSliceSource(in), o, nil)
		if err != nil {
			return nil, nil, nil, err
		}
		devs := slices.Clone(res.Devices)
		var segs [][]allocator.SegmentInfo
		for i := range devs {
			segs = append(segs, devs[i].Allocator.Segments())
			devs[i].Allocator, devs[i].Stats = nil, allocator.Stats{}
			devs[i].OOMs = slices.Clone(devs[i].OOMs)
			for j := range devs[i].OOMs {
				devs[i].OOMs[j].FreeCached = 0
			}
		}
		return devs, in, segs, nil
	}
	for _, name := range snapshotNames(t) {
		s := loadSnapshot(t, name)
		for _, cs := range []string{s.conf, "expandable_segments:True"} {
			conf, err := allocator.ParseConf(cs)
			if err != nil {
				t.Fatal(err)
			}
			recorded := cs == s.conf && !isWrap(name)
			for _, o := range []Options{
				{Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit, Recorded: recorded, SkipCompare: true, Annotate: recorded, Numbered: true},
				{Conf: conf, TotalMemory: s.total, MemoryLimit: 64 << 20, Numbered: true},
			} {
				want, wantEvs, wantSegs, wantErr := run(s.events, o, false)
				got, gotEvs, gotSegs, gotErr := run(s.events, o, true)
				if !reflect.DeepEqual(gotErr, wantErr) {
					t.Errorf("%s/%s limit %d: skipping the statistics fails with %v, keeping them with %v", name, cs, o.MemoryLimit, gotErr, wantErr)
					continue
				}
				if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotSegs, wantSegs) || !slices.Equal(gotEvs, wantEvs) {
					t.Errorf("%s/%s limit %d: skipping the statistics changes the replay:\n got %+v\nwant %+v", name, cs, o.MemoryLimit, got, want)
				}
			}
		}
	}
}
