package replay

import (
	"context"
	"reflect"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// slotKeeper is a SlotObserver that keeps every event, and counts those
// written in the slot it lent. It lends slots holding an old event, as a
// recycled batch's are, which the replay must overwrite whole.
type slotKeeper struct {
	evs    []trace.Event
	inSlot int
}

// stale is what a lent slot holds: every field set.
var stale = trace.Event{Seq: -7, TimeUs: 7, Device: 7, Kind: trace.KindOOM, Addr: 7, Size: 7, Stream: 7,
	Pool: trace.PoolID{A: 7, B: 7}, Stack: 7, Flags: trace.FlagPending, BlockSize: 7, DeviceUsed: 7, Ref: 7}

func (k *slotKeeper) Slot() *trace.Event {
	n := len(k.evs)
	if n == cap(k.evs) {
		k.evs = append(k.evs, trace.Event{})[:n]
	}
	k.evs[:n+1][n] = stale
	return &k.evs[:n+1][n]
}

func (k *slotKeeper) Event(ev *trace.Event) {
	if n := len(k.evs); n < cap(k.evs) && ev == &k.evs[:n+1][n] {
		k.inSlot++
		k.evs = k.evs[:n+1]
		return
	}
	k.evs = append(k.evs, *ev)
}

// TestSlotObserver: a replay writes the events it emits into the slots a
// SlotObserver lends (the allocator's events, all but the few a restore or
// an invented segment makes), and they are the events an Observer sees.
func TestSlotObserver(t *testing.T) {
	for _, name := range snapshotNames(t) {
		s := loadSnapshot(t, name)
		conf, err := allocator.ParseConf(s.conf)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Conf: conf, TotalMemory: s.total, MemoryLimit: s.limit}
		var want []trace.Event
		if _, err := Run(context.Background(), NewSliceSource(s.events), o, ObserverFunc(func(ev *trace.Event) { want = append(want, *ev) })); err != nil {
			t.Fatal(err)
		}
		var k slotKeeper
		if _, err := Run(context.Background(), NewSliceSource(s.events), o, &k); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(k.evs, want) {
			t.Errorf("%s: %d events in slots, %d by an Observer, or they differ", name, len(k.evs), len(want))
		}
		if len(want) > 0 && k.inSlot < len(want)/2 {
			t.Errorf("%s: %d of %d events written in the lent slots", name, k.inSlot, len(want))
		}
	}
}
