package pipeline_test

import (
	"context"
	"reflect"
	"runtime"
	"testing"

	"github.com/tracer-dev/tracer/pipeline"
)

// TestDecodersAhead: on 8 cores a replay's trace is decoded by goroutines
// ahead of the reader's, every record batch of it, and the replay's
// results are those of a replay on 2 cores, where the reader decodes
// alone.
func TestDecodersAhead(t *testing.T) {
	path := liveTrace(t, t.TempDir(), 200_000) // 4 record batches
	replayAt := func(procs int) (*pipeline.Run, pipeline.StageTimes) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		in, err := pipeline.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		set, err := in.RecordedSettings()
		if err != nil {
			t.Fatal(err)
		}
		var st pipeline.StageTimes
		pipeline.OnStages = func(s pipeline.StageTimes) { st = s }
		defer func() { pipeline.OnStages = nil }()
		run, err := pipeline.Replay(context.Background(), in, set, pipeline.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return run, st
	}
	two, st2 := replayAt(2)
	eight, st8 := replayAt(8)
	if st2.Decoded != 0 || st8.Decoded != 4 {
		t.Errorf("record batches decoded ahead: %d on 2 cores, %d on 8; want 0 and 4", st2.Decoded, st8.Decoded)
	}
	if !reflect.DeepEqual(two.Summaries, eight.Summaries) || !reflect.DeepEqual(two.Facts, eight.Facts) ||
		!reflect.DeepEqual(two.Result.Devices[0].Stats.Map(), eight.Result.Devices[0].Stats.Map()) || eight.Facts.Events < 200_000 {
		t.Errorf("the replay on 8 cores differs from the one on 2 (%d and %d events)", eight.Facts.Events, two.Facts.Events)
	}
}
