package record

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// The import keeps the snapshot's record_function scopes: mlp_train's 8
// Adam steps each enter and leave Optimizer.step and Optimizer.zero_grad,
// 32 edges in time order, all on device 0.
func TestImportKeepsAnnotations(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o.arrows")
	if _, err := ImportSnapshots(context.Background(), []string{"../testdata/snapshots/mlp_train__default.pickle"}, ImportOptions{Out: out}); err != nil {
		t.Fatal(err)
	}
	rd, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	as := rd.Meta().Annotations
	if len(as) != 32 {
		t.Fatalf("%d annotations, want 32", len(as))
	}
	starts := map[string]int{}
	for i, a := range as {
		if i > 0 && a.TimeUs < as[i-1].TimeUs {
			t.Errorf("annotation %d at %d µs, before %d", i, a.TimeUs, as[i-1].TimeUs)
		}
		if a.Device != 0 {
			t.Errorf("annotation %d on device %d", i, a.Device)
		}
		if a.Stage == trace.AnnotationStart {
			starts[a.Name]++
		}
	}
	if starts["Optimizer.step#Adam.step"] != 8 || starts["Optimizer.zero_grad#Adam.zero_grad"] != 8 {
		t.Errorf("scopes entered %v, want 8 of each optimizer scope", starts)
	}
}
