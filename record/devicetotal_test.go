package record

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// bigWrappedSnapshot writes a JSON snapshot whose history has wrapped with
// live GiB segments of 1 GiB, each one allocated block, live before the
// trace; the trace then reserves and allocates one more GiB, and frees it.
func bigWrappedSnapshot(t *testing.T, live int) string {
	const gib = 1 << 30
	base := uint64(0x7f0000000000)
	var segs []map[string]any
	for i := range live {
		addr := base + uint64(i)*gib
		segs = append(segs, map[string]any{"device": 0, "address": addr, "total_size": gib,
			"allocated_size": gib, "active_size": gib, "requested_size": gib, "stream": 0,
			"segment_type": "large", "segment_pool_id": []int{0, 0}, "is_expandable": false, "frames": []any{},
			"blocks": []map[string]any{{"address": addr, "size": gib, "requested_size": gib,
				"state": "active_allocated", "frames": []any{}}}})
	}
	addr := base + uint64(live)*gib
	ev := func(action string) map[string]any {
		return map[string]any{"action": action, "addr": addr, "size": gib, "stream": 0, "time_us": 1, "frames": []any{}}
	}
	snap := map[string]any{"segments": segs, "allocator_settings": map[string]any{},
		"device_traces": [][]map[string]any{{ev("segment_alloc"), ev("alloc"), ev("free_requested"), ev("free_completed")}}}
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestImportBeyond80GiB imports a wrapped snapshot with 100 GiB live: the
// annotation's model device holds at least what the trace reserved, so the
// import succeeds, given the device's size or not, and every recorded alloc
// and free gets its block size.
func TestImportBeyond80GiB(t *testing.T) {
	in := bigWrappedSnapshot(t, 100)
	for _, opts := range []ImportOptions{{}, {MemoryFraction: 1, DeviceTotal: 4096 << 30}} {
		opts.Out = filepath.Join(t.TempDir(), "big.arrows")
		res, err := ImportSnapshots(context.Background(), []string{in}, opts)
		if err != nil {
			t.Fatalf("total %d: %v", opts.DeviceTotal, err)
		}
		if len(res[0].Diverged) > 0 {
			t.Errorf("total %d: the model left the recording: %v", opts.DeviceTotal, res[0].Diverged)
		}
		r, err := trace.Open(opts.Out)
		if err != nil {
			t.Fatal(err)
		}
		recorded := 0
		for r.Next() {
			ev := r.Event()
			if ev.Flags&trace.FlagReconstructed != 0 {
				continue
			}
			switch ev.Kind {
			case trace.KindAlloc, trace.KindFreeRequested, trace.KindFreeCompleted:
				recorded++
				if ev.BlockSize != 1<<30 {
					t.Errorf("total %d: %v at %#x: block size %d, want 1 GiB", opts.DeviceTotal, ev.Kind, ev.Addr, ev.BlockSize)
				}
			}
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if recorded != 3 {
			t.Errorf("total %d: %d recorded block events, want 3", opts.DeviceTotal, recorded)
		}
	}
}
