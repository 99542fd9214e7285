package replay

// A small PyTorch snapshot loader for the differential tests. The production
// decoder is record/torchsnap; this stays in one file so it can be swapped for it.

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

const snapDir = "../testdata/snapshots"

type snapshot struct {
	name     string
	events   []trace.Event // device 0
	segments []allocator.SegmentInfo
	conf     string
	stats    map[string]any
	limit    int64 // floor(fraction × total_memory), 0 if none
	total    int64
}

func asInt(t testing.TB, v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64:
		return x
	case *big.Int:
		if x.IsInt64() {
			return x.Int64()
		}
		return int64(x.Uint64())
	case bool:
		if x {
			return 1
		}
		return 0
	}
	t.Fatalf("not an int: %T %v", v, v)
	return 0
}

func get(t testing.TB, d any, key string) any {
	dict, ok := d.(*types.Dict)
	if !ok {
		t.Fatalf("not a dict: %T", d)
	}
	v, ok := dict.Get(key)
	if !ok {
		return nil
	}
	return v
}

func list(t testing.TB, v any) []any {
	l, ok := v.(*types.List)
	if !ok {
		t.Fatalf("not a list: %T", v)
	}
	out := make([]any, l.Len())
	for i := range out {
		out[i] = l.Get(i)
	}
	return out
}

func loadSnapshot(t testing.TB, name string) *snapshot {
	t.Helper()
	root, err := pickle.Load(filepath.Join(snapDir, name+".pickle"))
	if err != nil {
		t.Fatal(err)
	}
	s := &snapshot{name: name}
	if set := get(t, root, "allocator_settings"); set != nil {
		s.conf, _ = get(t, set, "PYTORCH_CUDA_ALLOC_CONF").(string)
	}
	traces := list(t, get(t, root, "device_traces"))
	for i, e := range list(t, traces[0]) {
		action := get(t, e, "action").(string)
		k, ok := trace.ParseKind(action)
		if !ok {
			continue
		}
		ev := trace.Event{Seq: int64(i), Kind: k, Size: asInt(t, get(t, e, "size")),
			Stream: uint64(asInt(t, get(t, e, "stream"))), Stack: trace.NoStack}
		if v := get(t, e, "time_us"); v != nil {
			ev.TimeUs = asInt(t, v)
		}
		if k == trace.KindOOM {
			ev.Addr = uint64(asInt(t, get(t, e, "device_free")))
		} else {
			ev.Addr = uint64(asInt(t, get(t, e, "addr")))
		}
		s.events = append(s.events, ev)
	}
	for _, sg := range list(t, get(t, root, "segments")) {
		if asInt(t, get(t, sg, "device")) != 0 {
			continue
		}
		pid := get(t, sg, "segment_pool_id").(*types.Tuple)
		seg := allocator.SegmentInfo{
			Addr:       uint64(asInt(t, get(t, sg, "address"))),
			Size:       asInt(t, get(t, sg, "total_size")),
			Stream:     uint64(asInt(t, get(t, sg, "stream"))),
			Pool:       allocator.PoolID{A: uint64(asInt(t, pid.Get(0))), B: uint64(asInt(t, pid.Get(1)))},
			Small:      get(t, sg, "segment_type") == "small",
			Expandable: get(t, sg, "is_expandable").(bool),
		}
		for _, b := range list(t, get(t, sg, "blocks")) {
			st := allocator.Inactive
			switch get(t, b, "state") {
			case "active_allocated":
				st = allocator.ActiveAllocated
			case "active_pending_free":
				st = allocator.ActivePendingFree
			}
			seg.Blocks = append(seg.Blocks, allocator.BlockInfo{Addr: uint64(asInt(t, get(t, b, "address"))),
				Size: asInt(t, get(t, b, "size")), Requested: asInt(t, get(t, b, "requested_size")), State: st})
		}
		s.segments = append(s.segments, seg)
	}
	raw, err := os.ReadFile(filepath.Join(snapDir, name+".stats.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &s.stats); err != nil {
		t.Fatal(err)
	}
	s.total = int64(s.stats["total_memory"].(float64))
	if f, ok := s.stats["fraction"].(string); ok {
		var frac float64
		fmt.Sscan(f, &frac)
		s.limit = int64(math.Floor(frac * float64(s.total)))
	}
	if c, _ := s.stats["conf"].(string); c != s.conf {
		t.Fatalf("%s: pickle conf %q, stats.json conf %q", name, s.conf, c)
	}
	return s
}

func snapshotNames(t testing.TB) []string {
	m, err := filepath.Glob(filepath.Join(snapDir, "*.pickle"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no snapshots in %s: %v", snapDir, err)
	}
	var names []string
	for _, p := range m {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".pickle"))
	}
	return names
}
