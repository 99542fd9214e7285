#!/usr/bin/env bash
# gpu-run.sh runs package cuda's real-GPU tests and benchmarks from a test
# binary built elsewhere (no Go needed on the GPU machine). From the repo root:
#
#	CGO_ENABLED=1 go test -c -o .dev/cuda.test ./cuda   # on the build machine
#	cuda/testdata/gpu-run.sh .dev/cuda.test              # on the GPU machine
#
# Extra arguments go to the test binary (e.g. -test.run GPU_expandable).
set -euo pipefail

bin=${1:-.dev/cuda.test}
shift || true
if [[ ! -x $bin ]]; then
	echo "gpu-run.sh: no test binary at $bin; build it with: CGO_ENABLED=1 go test -c -o .dev/cuda.test ./cuda" >&2
	exit 2
fi
bin=$(realpath "$bin")

echo "== nvidia-smi"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv || true

# The test binary runs in the package directory, as go test does.
cd "$(dirname "$0")/.."

echo "== tests (TRACER_GPU=1)"
status=0
TRACER_GPU=1 "$bin" -test.v -test.count=1 "$@" || status=$?

echo "== benchmarks"
TRACER_GPU=1 "$bin" -test.run '^$' -test.bench . -test.benchtime 2000x -test.count 3 -test.benchmem || status=$?

echo "== gpu-run.sh: exit $status"
exit $status
