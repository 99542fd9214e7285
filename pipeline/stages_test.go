package pipeline

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestOnStages: with OnStages set, each Replay reports its stages once, as
// it returns, with the replay's settings and CPU time on its stages.
func TestOnStages(t *testing.T) {
	in, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	set, err := in.RecordedSettings()
	if err != nil {
		t.Fatal(err)
	}
	var got []StageTimes
	OnStages = func(s StageTimes) { got = append(got, s) }
	defer func() { OnStages = nil }()
	if _, err := Replay(context.Background(), in, set, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d reports, want 1", len(got))
	}
	s := got[0]
	if s.Label != set.Label || s.Wall <= 0 {
		t.Errorf("report %+v, want label %q and a wall time", s, set.Label)
	}
	// A thread's CPU time is kept in ticks, scaled: a stage of a
	// millisecond may read 0, but not all of them.
	if runtime.GOOS == "linux" && s.Read+s.Model+s.Analysis <= 0 {
		t.Errorf("report %+v: no CPU time", s)
	}
	if s.Read+s.Number+s.Model+s.Analysis+s.Finalize > s.Wall*time.Duration(runtime.NumCPU())+time.Millisecond {
		t.Errorf("report %+v: more CPU than the cores had", s)
	}
}
