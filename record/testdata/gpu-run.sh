#!/bin/sh
# Real-GPU checks of tracer record, run on the GPU machine from the repo root
# with binaries built beforehand (on any machine, same architecture):
#
#   CGO_ENABLED=1 go build -o .dev/tracer ./cmd/tracer
#   CGO_ENABLED=1 go test -c -o .dev/record.test ./record
#   record/testdata/gpu-run.sh            # PYTHON=... to pick an interpreter
#
# Writes traces and logs under ${OUT:-/tmp/tracer-gpu-run}. Exit status 0 when
# every check passed.
set -u
TRACER=${TRACER:-.dev/tracer}
TEST=${TEST:-.dev/record.test}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-/tmp/tracer-gpu-run}
mkdir -p "$OUT"
fail=0
check() { # name, expected exit status, command...
	name=$1 want=$2
	shift 2
	echo "== $name: $*"
	"$@" >"$OUT/$name.log" 2>&1
	got=$?
	cat "$OUT/$name.log"
	if [ "$got" != "$want" ]; then
		echo "FAIL $name: exit status $got, want $want"
		fail=1
	fi
}

nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv || true
"$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true

# 1. Every built-in workload live on the GPU, then its trace described.
for w in $("$TRACER" record --list-workloads | cut -d' ' -f1); do
	check "record-$w" 0 "$TRACER" record --workload "$w" --device cuda -o "$OUT/$w.arrows"
	check "info-$w" 0 "$TRACER" info "$OUT/$w.arrows"
done

# 2. Plain `tracer record` picks the GPU and says so.
(cd "$OUT" && check plain 0 "$OLDPWD/$TRACER" record) && grep -q "on GPU 0" "$OUT/plain.log" || { echo "FAIL plain: did not pick the GPU"; fail=1; }

# 3. A fragmentation OOM under a memory limit: exit 1, the trace ends in an oom event.
check oom 1 "$TRACER" record --workload fragment-10mb --device cuda --limit 1100MiB -o "$OUT/oom.arrows"
check info-oom 0 "$TRACER" info "$OUT/oom.arrows"
grep -q "oom 1" "$OUT/info-oom.log" || { echo "FAIL oom: no oom event in the trace"; fail=1; }

# 4. A real PyTorch program, recorded unchanged; then its exit status passed on.
check program 0 "$TRACER" record -o "$OUT/train.arrows" -- "$PYTHON" record/testdata/train_small.py
check info-program 0 "$TRACER" info "$OUT/train.arrows"
check program-exit 3 "$TRACER" record -o "$OUT/exit3.arrows" -- "$PYTHON" -c 'import torch, sys; x = torch.ones(1 << 20, device="cuda"); sys.exit(3)'
check program-oom 1 "$TRACER" record -o "$OUT/poom.arrows" -- "$PYTHON" -c 'import torch; torch.cuda.set_per_process_memory_fraction(0.01); x = torch.empty(1 << 34, dtype=torch.uint8, device="cuda")'
grep -q "dumped at oom" "$OUT/program-oom.log" || { echo "FAIL program-oom: not dumped at oom"; fail=1; }

# 5. The Go tests that need a GPU, and the recording benchmark.
check gotest 0 env TRACER_GPU=1 PYTHON="$PYTHON" "$TEST" -test.run 'GPU' -test.v
check bench 0 "$TEST" -test.run XXX -test.bench '^BenchmarkRecord$' -test.benchtime 10x # RecordDrive reads ../testdata: testdata/gpu/ab.sh runs it

# 6. Speed: our allocator on the GPU vs PyTorch's own, per event, on the same workload shape.
"$TRACER" record --workload small-tensors --device cuda -o "$OUT/speed.arrows" | tee "$OUT/speed-ours.log"
"$PYTHON" - <<'PY' | tee "$OUT/speed-torch.log"
import time, torch
torch.cuda.init()
n = 4 << 20
t0 = time.perf_counter()
data = [torch.empty(129, device="cuda") for _ in range(n)]
torch.cuda.synchronize()
dt = time.perf_counter() - t0
events = n + torch.cuda.memory_stats()["segment.all.allocated"]
print(f"torch small-tensors: {events} events in {dt:.2f}s: {events/dt:.0f} events/s ({dt/events*1e9:.0f} ns/event, incl. Python tensor creation)")
PY

[ $fail = 0 ] && echo "ALL OK" || echo "SOME CHECKS FAILED"
exit $fail
