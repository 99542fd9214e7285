package record

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// An import whose context is cancelled (tracer got SIGINT) stops, says so,
// and leaves nothing: cancelled while the snapshot is decoded, and while
// the trace is written.
func TestImportCancelled(t *testing.T) {
	in := "../testdata/snapshots/churn__split64__seed2.pickle"
	for _, at := range []string{"decoding", "writing"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if at == "decoding" {
				snapHook = cancel
			} else {
				followHook = func(bool) { cancel() }
			}
			defer func() { snapHook, followHook = nil, nil }()
			res, err := ImportSnapshots(ctx, []string{in}, ImportOptions{Out: filepath.Join(dir, "o.arrows")})
			if !errors.Is(err, context.Canceled) || res[0] != nil {
				t.Errorf("res %+v, err %v", res[0], err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %v", ents)
			}
		})
	}
}
