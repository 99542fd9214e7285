package pipeline

import (
	"context"
	"os"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/trace"
)

// RecordWorkload records a workload's text on the simulated device into a
// trace at path, which it returns.
var RecordWorkload = recordWorkload

// BatchRows is how many events the analysis is handed at once.
const BatchRows = behindRows

// ReplayedEvents replays the trace at path under its recorded settings and
// returns the events the model emitted, as the analysis stage sees them,
// and the blocks hint the command gives its summarizer (0 below
// prepareMin).
func ReplayedEvents(path string) ([]trace.Event, int, error) {
	in, err := Open(path)
	if err != nil {
		return nil, 0, err
	}
	s, err := in.RecordedSettings()
	if err != nil {
		return nil, 0, err
	}
	var evs []trace.Event
	_, err = Replay(context.Background(), in, s, Options{Analysis: analysis.Options{FragmentationOnly: true},
		SkipCompare: true, Observe: func(ev *trace.Event) { evs = append(evs, *ev) }})
	if err != nil {
		return nil, 0, err
	}
	var blocks int
	if st, err := os.Stat(path); err == nil && st.Size() >= prepareMin {
		blocks = int(min(st.Size()/bytesPerBlock, 1<<30)) / 2
	}
	return evs, blocks, nil
}
