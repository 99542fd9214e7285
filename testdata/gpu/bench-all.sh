#!/usr/bin/env bash
# The CPU figures of the README's Performance section, measured on the GPU
# machine's host (16 cores, nothing else running), and what `tracer record --
# python` adds to a PyTorch program. Build first, here:
#
#   testdata/gpu/build.sh
#
# then, on the GPU machine from the repo root: testdata/gpu/bench-all.sh
# [SECTION...], sections being model pipeline reader record import python
# torch (all when none is named; the whole takes about ten minutes).
# Single-core figures run pinned to one CPU, the 2-core ones to two
# (taskset), as the issues state their targets.
set -u
root=$(pwd)
log() { echo; echo "######## $*"; }
TIMEFORMAT='wall %R s, user %U s'
one="" two=""
if command -v taskset >/dev/null; then one="taskset -c 3" two="taskset -c 2,3"; fi
tm() { python3 testdata/bench/run_measured.py "$@"; }
sections="$*"
on() { [ -z "$sections" ] && return 0; for w in $sections; do [ "$w" = "$1" ] && return 0; done; return 1; }

log "machine"
grep -m1 'model name' /proc/cpuinfo; nproc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u

on model && {
log "allocator model: replays on one core (events/s)"
(cd replay && $one "$root/.dev/replay.test" -test.run XXX -test.bench 'Replay/(training|generated)' -test.benchtime 3x -test.cpu 1)
(cd replay && $one "$root/.dev/replay.test" -test.run XXX -test.bench 'Replay/snapshot|DriveSim' -test.benchtime 200x -test.cpu 1)

}
on pipeline && {
log "replay + analysis of a 10M-event trace on two cores"
(cd pipeline && TRACER_BENCH_TRACE=/tmp/bench10m.arrows $two "$root/.dev/pipeline.test" \
	-test.run XXX -test.bench ReplayAnalyze -test.benchtime 3x -test.cpu 2)
for args in "replay /tmp/bench10m.arrows --round 512" "replay /tmp/bench10m.arrows --round 4096" \
	"analyze /tmp/bench10m.arrows" "plot /tmp/bench10m.png /tmp/bench10m.arrows" "info /tmp/bench10m.arrows"; do
	echo "tracer $args"; time ($two .dev/tracer $args >/dev/null)
done

}
on reader && {
log "reading a trace"
(cd trace && $one "$root/.dev/trace.test" -test.run XXX -test.bench 'Reader|Writer' -test.count 3 -test.cpu 1)

}
on record && {
log "recording cost: the allocator alone vs recording to a trace"
(cd record && "$root/.dev/record.test" -test.run XXX -test.bench '^BenchmarkRecord$' -test.benchtime 4x -test.count 3)
log "recording cost on real request streams, warm (sim device)"
(cd record && "$root/.dev/record.test" -test.run XXX -test.bench 'RecordDrive' -test.benchtime 2000x -test.count 3)

}
on import && {
log "tracer import vs python's pickle.load, on a generated 200 MB snapshot and a 9 MB one"
(cd record/torchsnap && TORCHSNAP_GEN=/tmp/big.pickle TORCHSNAP_GEN_EVENTS=2500000 "$root/.dev/torchsnap.test" \
	-test.run TestSyntheticSnapshot -test.count 1 >/dev/null)
python3 record/torchsnap/testdata/scale_snapshot.py testdata/snapshots/multistream__default__seed1.pickle /tmp/ms10.pickle 10 >/dev/null
ls -l /tmp/big.pickle /tmp/ms10.pickle
for f in /tmp/big.pickle /tmp/ms10.pickle; do
	for i in 1 2 3; do
		tm "tracer import $f" .dev/tracer import "$f" -o /tmp/imported.arrows
		tm "python3 pickle.load $f" python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$f"
	done
done

}
on python && {
log "tracer record -- python: a training loop's time, plain, with PyTorch's history, under tracer"
python3 testdata/bench/train_loop.py 5 >/dev/null 2>&1 # warm the kernel caches
for i in 1 2 3; do
	python3 testdata/bench/train_loop.py 300
	python3 testdata/bench/train_loop.py 300 --history
	time (.dev/tracer record -o /tmp/loop.arrows -- python3 testdata/bench/train_loop.py 300)
done
.dev/tracer info /tmp/loop.arrows | head -4
}
on torch && {
log "PyTorch's own allocator vs ours (cuda device, warm) on the same request streams"
mkdir -p /tmp/bt
(cd replay && TRACER_GPU=1 TRACER_BENCH_TRACES=/tmp/bt "$root/.dev/replay.test" -test.run XXX \
	-test.bench 'DriveCUDA' -test.benchtime 300x -test.count 3)
for t in /tmp/bt/*.arrows; do python3 testdata/bench/torch_replay.py "$t" 20 2>&1 | grep -v Warning | tail -1; done
log "recording cost on the same streams, our allocator on the GPU"
(cd record && TRACER_GPU=1 "$root/.dev/record.test" -test.run XXX -test.bench 'RecordDrive' -test.benchtime 2000x -test.count 3)
}
log "done"; date -u
