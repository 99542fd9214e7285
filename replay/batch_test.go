package replay

import (
	"context"
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// replayInput is a trace to replay under opts.
type replayInput struct {
	name string
	evs  []trace.Event
	opts Options
}

// snapshotInputs are the snapshots, each under its recorded settings
// (compared with the recording but for the wrapped ones).
func snapshotInputs(t *testing.T) []replayInput {
	var ins []replayInput
	for _, name := range snapshotNames(t) {
		s := loadSnapshot(t, name)
		conf, err := allocator.ParseConf(s.conf)
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, replayInput{name, s.events, Options{Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit, Recorded: !isWrap(name)}})
	}
	return ins
}

// genTwoDevices is n generated events in runs of 7 per device of two, but
// for the first one's first events, before seq first.
func genTwoDevices(n, first int64) []trace.Event {
	var two []trace.Event
	g := newGenSource(n)
	for g.Next() {
		ev := *g.Event()
		if ev.Seq >= first {
			ev.Device = int32(ev.Seq / 7 % 2)
		}
		two = append(two, ev)
	}
	return two
}

// nextOnly hides a source's NextBatch, so Run takes its per-event path.
type nextOnly struct{ Source }

// smallBatches serves a slice in batches of n events, reusing one buffer as
// a decoder would, so a held event must be copied at every batch's end.
type smallBatches struct {
	evs []trace.Event
	buf []trace.Event
	SliceSource
}

func (s *smallBatches) NextBatch() []trace.Event {
	k := min(len(s.evs), cap(s.buf))
	b := append(s.buf[:0], s.evs[:k]...)
	s.evs = s.evs[k:]
	clear(s.buf[k:cap(s.buf)])
	return b
}

// TestBatchPath checks that Run replays a BatchSource exactly as it replays
// the same events one at a time: on every snapshot (Recorded, so every
// replayed event is compared too), and on a generated trace interleaving
// two devices, whose frees are held across batch ends.
func TestBatchPath(t *testing.T) {
	ins := append(snapshotInputs(t), replayInput{"two-devices", genTwoDevices(200_000, 0), Options{Conf: allocator.DefaultConf(), TotalMemory: 1 << 40}})
	for _, in := range ins {
		var want, got []trace.Event
		obs := func(out *[]trace.Event) Observer {
			return ObserverFunc(func(ev *trace.Event) { *out = append(*out, *ev) })
		}
		r1, err := Run(context.Background(), nextOnly{NewSliceSource(in.evs)}, in.opts, obs(&want))
		if err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
		for _, size := range []int{1, 3, 64, len(in.evs) + 1} {
			got = got[:0]
			src := &smallBatches{evs: in.evs, buf: make([]trace.Event, 0, size)}
			r2, err := Run(context.Background(), src, in.opts, obs(&got))
			if err != nil {
				t.Fatalf("%s batches of %d: %v", in.name, size, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s batches of %d: %d replayed events differ from the per-event path's %d", in.name, size, len(got), len(want))
			}
			for i := range r1.Devices {
				a, b := r1.Devices[i], r2.Devices[i]
				a.Allocator, b.Allocator = nil, nil
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("%s batches of %d: device %d result %+v, per-event %+v", in.name, size, a.Device, b, a)
				}
			}
		}
	}
}
