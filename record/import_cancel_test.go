package record

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// An import whose context is cancelled (tracer got SIGINT) stops, says so,
// and leaves nothing: cancelled while the snapshot is decoded, and while
// the trace is written; spilled, and decoded in memory with its records in
// a scratch file or in the mapping (each with its follower).
func TestImportCancelled(t *testing.T) {
	in := "../testdata/snapshots/churn__split64__seed2.pickle"
	for _, c := range []struct {
		at     string
		memory int // 0 spilled; 1 in memory, scratch file; 2 in memory, mapping
	}{{"decoding", 0}, {"writing", 0}, {"decoding", 1}, {"writing", 1}, {"decoding", 2}, {"writing", 2}} {
		at := c.at
		t.Run(fmt.Sprintf("%s/%s", at, []string{"spilled", "scratch", "mapping"}[c.memory]), func(t *testing.T) {
			if c.memory > 0 {
				decodeInMemory(t, c.memory == 1)
			}
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if at == "decoding" {
				snapHook = cancel
			} else {
				followHook = func(bool) { cancel() }
			}
			defer func() { snapHook, followHook = nil, nil }()
			before := runtime.NumGoroutine()
			res, err := ImportSnapshots(ctx, []string{in}, ImportOptions{Out: filepath.Join(dir, "o.arrows")})
			// Every goroutine the import started (decoder helpers, the
			// follower, readers, writers) is gone soon after.
			for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines left running (%d before):\n%s", n-before, before, buf[:runtime.Stack(buf, true)])
			}
			if !errors.Is(err, context.Canceled) || res[0] != nil {
				t.Errorf("res %+v, err %v", res[0], err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %v", ents)
			}
		})
	}
}
