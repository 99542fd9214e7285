package record

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestGiveBackAfterStartState: a spilled import whose start state came
// from the follower gives its garbage back once, after the start state,
// when the follower's tables are garbage too (a give-back after the
// decode, while they are live, left them resident at the peak); one that
// reads its spill back gives back after the decode, before those passes;
// a file under giveBackMin gives back nothing.
func TestGiveBackAfterStartState(t *testing.T) {
	in := "../testdata/snapshots/churn__gc60__seed1.pickle" // one device
	defer func(min int64) { giveBackMin, giveBackHook, noFollow = min, nil, false }(giveBackMin)
	for _, tc := range []struct {
		name     string
		min      int64
		noFollow bool
		want     []string
	}{
		{"followed", 0, false, []string{"start state"}},
		{"read back", 0, true, []string{"decode"}},
		{"small", 1 << 40, false, nil},
	} {
		var got []string
		giveBackHook = func(stage string) { got = append(got, stage) }
		giveBackMin, noFollow = tc.min, tc.noFollow
		if _, err := importOne(context.Background(), in, filepath.Join(t.TempDir(), "out.arrows"), ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: gave back after %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestGiveBackReleaseBeside: the release of the executable's pages
// (textpages.Release) runs beside what follows a give-back, not before it:
// an import whose release is held until the import has returned still
// returns, and its stages come in that order. With the release back on the
// import's path, the import waits for it and the test fails (after a
// minute: the import is stuck).
func TestGiveBackReleaseBeside(t *testing.T) {
	in := "../testdata/snapshots/churn__gc60__seed1.pickle" // one device
	defer func(min int64) { giveBackMin, giveBackHook, releaseHook = min, nil, nil }(giveBackMin)
	giveBackMin = 0
	var mu sync.Mutex
	var order []string
	log := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	imported, released := make(chan struct{}), make(chan struct{})
	giveBackHook = func(stage string) { log("give back after " + stage) }
	releaseHook = func() {
		<-imported
		log("release")
		close(released)
	}
	go func() {
		if _, err := importOne(context.Background(), in, filepath.Join(t.TempDir(), "out.arrows"), ImportOptions{}); err != nil {
			t.Error(err)
		}
		log("imported")
		close(imported)
	}()
	select {
	case <-released:
	case <-time.After(time.Minute):
		t.Fatal("the import did not return while its release was held: the release is on its path")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"give back after start state", "imported", "release"}; !slices.Equal(order, want) {
		t.Errorf("stages %q, want %q", order, want)
	}
}

// TestSpilledImportForcesNoCollection: a spilled import's decoder and
// follower make their large tables outside the heap and unmap them
// themselves, so it forces no collection (about 2 ms of a 10 MB import's
// critical path on the GPU host), followed or read back; an import
// decoded in memory (then Spilled too, its records in a scratch file)
// still forces one before its annotation. With the collection back on a
// sequential decode's give-backs, the spilled cases fail.
func TestSpilledImportForcesNoCollection(t *testing.T) {
	in := "../testdata/snapshots/churn__gc60__seed1.pickle" // one device
	defer func(min, max int64) { giveBackMin, streamMax, noFollow = min, max, false }(giveBackMin, streamMax)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // decodesInMemory needs 4
	giveBackMin = 0
	for _, tc := range []struct {
		name      string
		streamMax int64
		noFollow  bool
		forced    bool
	}{
		{"followed spill", 1 << 40, false, false},
		{"spill read back", 1 << 40, true, false},
		{"in memory", -1, false, true},
	} {
		streamMax, noFollow = tc.streamMax, tc.noFollow
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res, err := importOne(context.Background(), in, filepath.Join(t.TempDir(), "out.arrows"), ImportOptions{})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if res.Events == 0 {
			t.Fatalf("%s: no events imported", tc.name)
		}
		if n := after.NumForcedGC - before.NumForcedGC; (n > 0) != tc.forced {
			t.Errorf("%s: %d forced collections, want any: %v", tc.name, n, tc.forced)
		}
	}
}
