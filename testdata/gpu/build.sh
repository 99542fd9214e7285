#!/usr/bin/env bash
# Builds what testdata/gpu/run-all.sh runs on the GPU machine, into .dev/.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .dev
export CGO_ENABLED=1
go build -ldflags='-s -w' -o .dev/tracer ./cmd/tracer
go test -c -ldflags='-s -w' -o .dev/cuda.test ./cuda
go test -c -ldflags='-s -w' -o .dev/record.test ./record
go test -c -ldflags='-s -w' -o .dev/replay.test ./replay
go test -c -ldflags='-s -w' -o .dev/pipeline.test ./pipeline
go test -c -ldflags='-s -w' -o .dev/trace.test ./trace
go test -c -ldflags='-s -w' -o .dev/torchsnap.test ./record/torchsnap
du -sh .dev
