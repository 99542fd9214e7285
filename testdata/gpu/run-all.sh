#!/usr/bin/env bash
# Every GPU check and figure of the README, in one run on the GPU machine
# (no Go there). Build first, here:
#
#   testdata/gpu/build.sh            # .dev/{tracer,cuda.test,record.test,replay.test}
#
# then, on the GPU machine from the repo root: testdata/gpu/run-all.sh OUTDIR
set -u
out=${1:-/tmp/tracer-gpu}
mkdir -p "$out"
root=$(pwd)
log() { echo; echo "######## $*"; }

log "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
python3 -c 'import torch, pyarrow; print("torch", torch.__version__, "pyarrow", pyarrow.__version__)'
date -u

log "cuda package: driver API and NVML tests, device call benchmarks"
cuda/testdata/gpu-run.sh .dev/cuda.test 2>&1 | tail -40

log "replay: our allocator (warm) vs PyTorch's own, same request streams (leaves the traces in /tmp/bt)"
bash testdata/gpu/bench-all.sh torch

log "tracer replay --device cuda"
.dev/tracer replay --device cuda /tmp/bt/mlp_train__default.arrows
.dev/tracer replay --device cuda --conf expandable_segments:True /tmp/bt/churn__split64__seed2.arrows

log "tracer record: workloads live on the GPU, a PyTorch program, an OOM under a limit"
OUT="$out/record" record/testdata/gpu-run.sh 2>&1 | grep -v "^\s*$" | tail -120

log "pyarrow reads real traces (imported, recorded live, recorded from python)"
python3 - "$out" /tmp/bt/mlp_train__default.arrows "$out/record/fragment-10mb.arrows" "$out/record/train.arrows" <<'PY'
import sys, pyarrow.ipc as ipc
for p in sys.argv[2:]:
    try:
        t = ipc.open_stream(p).read_all()
        df = t.to_pandas()
        print(p, t.num_rows, "rows;", dict(df.action.value_counts()), "metadata source:", t.schema.metadata[b"tracer.source"].decode())
    except Exception as e:
        print(p, "FAILED", e)
PY
log "done"; date -u
