package analysistest

import (
	"context"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/sample"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// Sample replays the built-in sample trace on the allocator model under
// conf (PYTORCH_CUDA_ALLOC_CONF syntax; "" for the defaults) and passes
// each event the model emits to emit (the Event is reused: copy it to keep
// it): a real program's stream, under settings other than its own.
func Sample(conf string, emit func(*trace.Event)) error {
	rd, err := sample.Open()
	if err != nil {
		return err
	}
	defer rd.Close()
	c, err := allocator.ParseConf(conf)
	if err != nil {
		return err
	}
	_, err = replay.Run(context.Background(), rd, replay.Options{Conf: c}, replay.ObserverFunc(emit))
	return err
}
