package record

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
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
