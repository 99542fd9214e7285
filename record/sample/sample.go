// Package sample holds the trace built into the tracer binary, so that
// `tracer replay`, `analyze` and `plot` work with no argument on a fresh
// machine: a real PyTorch run (testdata/snapshots/mlp_train__default.pickle,
// a 6-layer 2048-wide MLP trained with Adam for 8 steps on an H100, torch
// 2.11), imported by tracer. TestSampleIsFresh keeps it equal to a fresh
// import of that snapshot; `go test ./record/sample -update` rewrites it.
package sample

import (
	"bytes"
	_ "embed"

	"github.com/tracer-dev/tracer/trace"
)

//go:embed mlp_train.arrows
var data []byte

// Name is how tracer names the sample in its output.
const Name = "mlp_train (built-in sample: 6-layer MLP training on an H100, torch 2.11)"

// Open returns a reader over the built-in sample trace.
func Open() (*trace.Reader, error) {
	return trace.NewReader(bytes.NewReader(data), "built-in sample")
}

// Bytes returns the sample trace file's bytes.
func Bytes() []byte { return data }
