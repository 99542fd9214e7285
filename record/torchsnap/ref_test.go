package torchsnap

import (
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"testing"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"

	"github.com/tracer-dev/tracer/trace"
)

// refDecode is an independent, deliberately naive reader: gopickle's generic
// object graph walked with map lookups. The fast decoder must agree with it.
func refDecode(t testing.TB, path string) *Snapshot {
	t.Helper()
	obj, err := pickle.Load(path)
	if err != nil {
		t.Fatalf("gopickle %s: %v", path, err)
	}
	r := &refReader{stackIdx: map[string]trace.StackID{}}
	s := &Snapshot{}
	var segs *types.List
	var traces *types.List
	switch o := obj.(type) {
	case *types.List:
		s.SegmentsOnly = true
		segs = o
	case *types.Dict:
		if v, ok := o.Get("segments"); ok {
			segs = v.(*types.List)
		}
		if v, ok := o.Get("device_traces"); ok {
			traces = v.(*types.List)
		}
		if v, ok := o.Get("allocator_settings"); ok {
			d := v.(*types.Dict)
			s.Settings.AllocConf = get(d, "PYTORCH_CUDA_ALLOC_CONF").(string)
			s.Settings.MaxSplitSize = refInt(get(d, "max_split_size"))
			s.Settings.GarbageCollectionThreshold = get(d, "garbage_collection_threshold").(float64)
			s.Settings.ExpandableSegments = get(d, "expandable_segments").(bool)
			rd := get(d, "roundup_power2_divisions").(*types.Dict)
			for i := range 16 {
				s.Settings.RoundupPower2Divisions[i] = refInt(get(rd, fmt.Sprint(1<<i)))
			}
		}
		if v, ok := o.Get("external_annotations"); ok {
			l := v.(*types.List)
			for i := 0; i < l.Len(); i++ {
				d := l.Get(i).(*types.Dict)
				s.Annotations = append(s.Annotations, Annotation{
					Name: get(d, "name").(string), Stage: get(d, "stage").(string),
					Device: int32(refInt(get(d, "device"))), TimeUs: refInt(get(d, "time_us")),
				})
			}
		}
	}
	devs := map[int32]*Device{}
	dev := func(i int32) *Device {
		if devs[i] == nil {
			devs[i] = &Device{Index: i, Skipped: map[string]int{}}
		}
		return devs[i]
	}
	for i := 0; segs != nil && i < segs.Len(); i++ {
		d := segs.Get(i).(*types.Dict)
		sg := Segment{
			Addr: uint64(refInt(get(d, "address"))), TotalSize: refInt(get(d, "total_size")),
			AllocatedSize: refInt(get(d, "allocated_size")), ActiveSize: refInt(get(d, "active_size")),
			RequestedSize: refInt(get(d, "requested_size")), Stream: uint64(refInt(get(d, "stream"))),
			Large: get(d, "segment_type") == "large", Expandable: get(d, "is_expandable").(bool),
			Stack: r.stack(get(d, "frames")),
		}
		if p, ok := d.Get("segment_pool_id"); ok {
			tp := p.(*types.Tuple)
			sg.Pool = trace.PoolID{A: uint64(refInt(tp.Get(0))), B: uint64(refInt(tp.Get(1)))}
		}
		bl := get(d, "blocks").(*types.List)
		for j := 0; j < bl.Len(); j++ {
			bd := bl.Get(j).(*types.Dict)
			st, _ := parseBlockState(get(bd, "state").(string))
			sg.Blocks = append(sg.Blocks, Block{
				Addr: uint64(refInt(get(bd, "address"))), Size: refInt(get(bd, "size")),
				RequestedSize: refInt(get(bd, "requested_size")), State: st, Stack: r.stack(get(bd, "frames")),
			})
		}
		dv := int32(refInt(get(d, "device")))
		dev(dv).Segments = append(dev(dv).Segments, sg)
	}
	for i := 0; traces != nil && i < traces.Len(); i++ {
		l := traces.Get(i).(*types.List)
		if l.Len() == 0 {
			continue
		}
		d := dev(int32(i))
		for j := 0; j < l.Len(); j++ {
			e := l.Get(j).(*types.Dict)
			k, ok := trace.ParseKind(get(e, "action").(string))
			if !ok {
				d.Skipped[get(e, "action").(string)]++
				continue
			}
			ev := trace.Event{Seq: int64(len(d.Events)), Device: int32(i), Kind: k,
				Size: refInt(get(e, "size")), Stream: uint64(refInt(get(e, "stream"))), Stack: trace.NoStack}
			if k == trace.KindOOM {
				ev.Addr = uint64(refInt(get(e, "device_free")))
			} else {
				ev.Addr = uint64(refInt(get(e, "addr")))
			}
			if v, ok := e.Get("time_us"); ok {
				ev.TimeUs = refInt(v)
			}
			if v, ok := e.Get("frames"); ok {
				ev.Stack = r.stack(v)
			}
			d.Events = append(d.Events, ev)
		}
	}
	for _, d := range devs {
		sort.Slice(d.Segments, func(i, j int) bool { return d.Segments[i].Addr < d.Segments[j].Addr })
		s.Devices = append(s.Devices, d)
	}
	sort.Slice(s.Devices, func(i, j int) bool { return s.Devices[i].Index < s.Devices[j].Index })
	s.Stacks = r.stacks
	return s
}

type refReader struct {
	stacks   []trace.Stack
	stackIdx map[string]trace.StackID
}

func (r *refReader) stack(v any) trace.StackID {
	l, ok := v.(*types.List)
	if !ok || l.Len() == 0 {
		return trace.NoStack
	}
	var st trace.Stack
	for i := 0; i < l.Len(); i++ {
		f := l.Get(i).(*types.Dict)
		st = append(st, trace.Frame{Name: get(f, "name").(string), File: get(f, "filename").(string), Line: int32(refInt(get(f, "line")))})
	}
	key := fmt.Sprint(st)
	id, ok := r.stackIdx[key]
	if !ok {
		id = trace.StackID(len(r.stacks))
		r.stacks = append(r.stacks, st)
		r.stackIdx[key] = id
	}
	return id
}

func get(d *types.Dict, k string) any {
	v, _ := d.Get(k)
	return v
}

func refInt(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case bool:
		if x {
			return 1
		}
		return 0
	case *big.Int:
		return int64(x.Uint64())
	}
	panic(fmt.Sprintf("refInt(%T)", v))
}

// sameSnapshot reports the first difference between two snapshots, comparing
// stacks by content (the two readers number them differently).
func sameSnapshot(t testing.TB, got, want *Snapshot) {
	t.Helper()
	stk := func(s *Snapshot, id trace.StackID) trace.Stack {
		if id == trace.NoStack {
			return nil
		}
		return s.Stacks[id]
	}
	if got.SegmentsOnly != want.SegmentsOnly {
		t.Fatalf("SegmentsOnly %v, want %v", got.SegmentsOnly, want.SegmentsOnly)
	}
	gs, ws := got.Settings, want.Settings
	gs.JSON, ws.JSON = "", ""
	if gs != ws {
		t.Errorf("settings %+v, want %+v", gs, ws)
	}
	if len(got.Annotations) != len(want.Annotations) {
		t.Errorf("%d annotations, want %d", len(got.Annotations), len(want.Annotations))
	} else {
		for i := range got.Annotations {
			g, w := got.Annotations[i], want.Annotations[i]
			if g.Name != w.Name || g.Stage != w.Stage || g.Device != w.Device || g.TimeUs != w.TimeUs {
				t.Errorf("annotation %d: %+v, want %+v", i, g, w)
			}
		}
	}
	if len(got.Devices) != len(want.Devices) {
		t.Fatalf("%d devices, want %d", len(got.Devices), len(want.Devices))
	}
	for di, gd := range got.Devices {
		wd := want.Devices[di]
		if gd.Index != wd.Index || len(gd.Events) != len(wd.Events) || len(gd.Segments) != len(wd.Segments) {
			t.Fatalf("device %d: index %d/%d events %d/%d segments %d/%d", di, gd.Index, wd.Index,
				len(gd.Events), len(wd.Events), len(gd.Segments), len(wd.Segments))
		}
		if !reflect.DeepEqual(gd.Skipped, wd.Skipped) {
			t.Errorf("device %d skipped %v, want %v", gd.Index, gd.Skipped, wd.Skipped)
		}
		for i := range gd.Events {
			g, w := gd.Events[i], wd.Events[i]
			gst, wst := stk(got, g.Stack), stk(want, w.Stack)
			g.Stack, w.Stack = 0, 0
			if g != w || !reflect.DeepEqual(gst, wst) {
				t.Fatalf("device %d event %d: %+v %v\nwant %+v %v", gd.Index, i, g, gst, w, wst)
			}
		}
		for i := range gd.Segments {
			g, w := gd.Segments[i], wd.Segments[i]
			if !reflect.DeepEqual(stk(got, g.Stack), stk(want, w.Stack)) {
				t.Fatalf("segment %d stack differs", i)
			}
			if len(g.Blocks) != len(w.Blocks) {
				t.Fatalf("segment %d: %d blocks, want %d", i, len(g.Blocks), len(w.Blocks))
			}
			for j := range g.Blocks {
				gb, wb := g.Blocks[j], w.Blocks[j]
				if !reflect.DeepEqual(stk(got, gb.Stack), stk(want, wb.Stack)) {
					t.Fatalf("segment %d block %d stack differs", i, j)
				}
				gb.Stack, wb.Stack = 0, 0
				if gb != wb {
					t.Fatalf("segment %d block %d: %+v, want %+v", i, j, gb, wb)
				}
			}
			g.Stack, w.Stack, g.Blocks, w.Blocks = 0, 0, nil, nil
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("segment %d: %+v, want %+v", i, g, w)
			}
		}
	}
}
