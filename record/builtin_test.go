package record_test

import (
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/trace"
)

// The built-in workloads reproduce what the articles measured, read back from
// the trace (and the allocator's own peaks agree).
func TestBuiltins(t *testing.T) {
	t.Run("small-tensors", func(t *testing.T) {
		if testing.Short() {
			t.Skip("4M allocations")
		}
		peak, _, final, _ := replayState(t, mustRecord(t, "small-tensors"))
		const n = 4 << 20
		// 516 B requests take 1024 B blocks: memory doubles (1024/516).
		if final.requested != n*516 || final.allocated != n*1024 {
			t.Errorf("requested %d, allocated %d; want %d and %d", final.requested, final.allocated, n*516, n*1024)
		}
		if r := float64(final.allocated) / float64(final.requested); r < 1.98 || r > 2 {
			t.Errorf("allocated/requested = %.3f, want ≈ 2", r)
		}
		if peak.reserved != 4*gib {
			t.Errorf("reserved %d, want 4 GiB (2048 small segments)", peak.reserved)
		}
	})
	t.Run("tiny-tensors", func(t *testing.T) {
		if testing.Short() {
			t.Skip("8M allocations")
		}
		_, _, final, _ := replayState(t, mustRecord(t, "tiny-tensors"))
		if final.allocated != 4*gib || final.requested != 32*mib {
			t.Errorf("allocated %d, requested %d; want 4 GiB for 32 MiB", final.allocated, final.requested)
		}
	})
	t.Run("block-boundary", func(t *testing.T) {
		_, marks, _, evs := replayState(t, mustRecord(t, "block-boundary"))
		want := []state{
			{allocated: 2048 * 2 * mib, reserved: 205 * 20 * mib},
			{allocated: 2048 * (2*mib + 512), reserved: 228 * 20 * mib},
			{allocated: 2048 * mib, reserved: 1024 * 2 * mib},
			{reserved: 108 * 20 * mib},
		}
		if len(marks) != len(want) {
			t.Fatalf("%d snapshots, want %d", len(marks), len(want))
		}
		for i, w := range want {
			if marks[i].reserved != w.reserved || (w.allocated != 0 && marks[i].allocated != w.allocated) {
				t.Errorf("phase %d: allocated %d reserved %d, want %d and %d", i, marks[i].allocated, marks[i].reserved, w.allocated, w.reserved)
			}
		}
		// The first 2 MiB + 1 request gets a 20 MiB segment.
		for i, ev := range evs {
			if ev.Kind == trace.KindAlloc && ev.Size == 2*mib+1 {
				if prev := evs[i-1]; prev.Kind != trace.KindSegmentAlloc || prev.Size != 20*mib {
					t.Errorf("2 MiB + 1 B alloc follows %v of %d bytes, want a 20 MiB segment_alloc", prev.Kind, prev.Size)
				}
				break
			}
		}
	})
	t.Run("fragment-10mb", func(t *testing.T) {
		_, marks, final, evs := replayState(t, mustRecord(t, "fragment-10mb"))
		holes := marks[0]
		if holes.reserved != 1000*mib || holes.reserved-holes.allocated < 500_000_000 {
			t.Fatalf("after the frees: reserved %d, allocated %d; want 1000 MiB with ≥ 500 MB free", holes.reserved, holes.allocated)
		}
		// The 200 MB request cannot reuse the holes: a new segment, reserved grows.
		last := evs[len(evs)-1]
		if seg := evs[len(evs)-2]; last.Kind != trace.KindAlloc || last.Size != 200_000_000 || seg.Kind != trace.KindSegmentAlloc || seg.Size != 192*mib {
			t.Errorf("the 200 MB request: %v %d after %v %d; want alloc after a 192 MiB segment_alloc", last.Kind, last.Size, seg.Kind, seg.Size)
		}
		if final.reserved != 1192*mib {
			t.Errorf("reserved %d, want 1192 MiB", final.reserved)
		}
	})
	t.Run("backward-1gib", func(t *testing.T) {
		path, res := recordBuiltin(t, "backward-1gib", record.Options{})
		peak, marks, _, _ := replayState(t, path)
		if len(marks) != 3 {
			t.Fatalf("%d snapshots, want 3", len(marks))
		}
		// Without retain_grad: x, y, x.grad live; y's gradient cached.
		if m := marks[0]; m.allocated != 3*gib || m.reserved != 4*gib+2*mib {
			t.Errorf("after backward: allocated %d, reserved %d; want 3 GiB and 4 GiB + 2 MiB", m.allocated, m.reserved)
		}
		if m := marks[1]; m.reserved != 3*gib {
			t.Errorf("after empty_cache: reserved %d, want 3 GiB", m.reserved)
		}
		// With retain_grad: y.grad is a copy; five 1 GiB blocks reserved.
		if m := marks[2]; m.allocated != 4*gib || m.reserved != 5*gib+2*mib {
			t.Errorf("with retain_grad: allocated %d, reserved %d; want 4 GiB and 5 GiB + 2 MiB", m.allocated, m.reserved)
		}
		if peak.allocated != 5*gib+512 || res.Stats.AllocatedBytes[0].Peak != peak.allocated {
			t.Errorf("peak allocated %d (allocator: %d), want 5 GiB + 512 B", peak.allocated, res.Stats.AllocatedBytes[0].Peak)
		}
	})
}

// The first phase of backward-1gib alone peaks at 4 GiB, as the article measured.
func TestBackwardWithoutRetainGradPeak(t *testing.T) {
	w, _ := record.Builtin("backward-1gib")
	src := string(w.Source)
	first := src[:strings.Index(src, "# 2. With")]
	path, _ := recordSim(t, parse(t, first), record.Options{})
	peak, _, _, _ := replayState(t, path)
	if peak.allocated != 4*gib+512 || peak.reserved != 4*gib+2*mib {
		t.Errorf("peak allocated %d, reserved %d; want 4 GiB + 512 B and 4 GiB + 2 MiB", peak.allocated, peak.reserved)
	}
}

func mustRecord(t *testing.T, name string) string {
	path, _ := recordBuiltin(t, name, record.Options{})
	return path
}

func recordBuiltin(t *testing.T, name string, opts record.Options) (string, *record.Result) {
	t.Helper()
	w, ok := record.Builtin(name)
	if !ok {
		t.Fatalf("no built-in %s", name)
	}
	return recordSim(t, w, opts)
}
