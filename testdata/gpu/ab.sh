#!/usr/bin/env bash
# Side-by-side figures of two builds on the GPU machine's host: an old one
# (OLD, say the session's first commit) and a new one (NEW), run alternately
# in one go, so the host's drift (20–40% between runs) falls on both alike.
# Build both here, each with testdata/gpu/build.sh, into two folders under
# .dev (for the old one, from a `git worktree add` of its commit:
# `go build -o DIR/tracer ./cmd/tracer; go test -c -o DIR/replay.test ./replay`
# and so on for record and record/torchsnap), carry them, then, from the repo
# root there:
#
#   testdata/gpu/ab.sh OLD NEW [SECTION...]
#
# sections: model (replays on one core: the 10M-event generated streams
# from memory and the snapshots on a Replayer; ROUNDS rounds, 3 unless set,
# then each benchmark's rates and median ratio), import (tracer import against
# python's pickle.load on a real 10 MB snapshot, a 9 MB one and a generated
# 200 MB one; ROUNDS rounds, 5 unless set, then medians and ratios),
# record (what recording adds to the allocator, sim and cuda devices); all
# when none is named. A section runs only where both folders hold its
# binaries.
set -u
old=$1 new=$2
shift 2
root=$(pwd)
log() { echo; echo "######## $*"; }
one=""
if command -v taskset >/dev/null; then one="taskset -c $(($(nproc) > 3 ? 3 : $(nproc) - 1))"; fi
sections="$*"
on() { [ -z "$sections" ] && return 0; for w in $sections; do [ "$w" = "$1" ] && return 0; done; return 1; }
have() { [ -x "$old/$1" ] && [ -x "$new/$1" ]; }
tm() { python3 testdata/bench/run_measured.py "$@"; }
# Peak RSS under run_measured.py is never below Python's own (see
# testdata/bench/maxrss.c); where gcc is there, maxrss measures instead.
if command -v gcc >/dev/null && gcc -O2 -static -o /tmp/maxrss testdata/bench/maxrss.c 2>/dev/null; then
	tm() { label=$1; shift; echo "$label: $(/tmp/maxrss "$@")" >&2; }
fi

# summarize ROUNDS: from tm's lines "LABEL: T s R MiB rc=0" (maxrss's
# form), each program's median time and RSS range, and the median of the
# per-round ratios of pickle.load's time to each tracer's.
summarize() {
	[ -x /tmp/maxrss ] || return 0 # run_measured.py's lines are of another form
	for k in old new python3; do
		grep "^$k " "$1" | awk '{print $(NF-4), $(NF-2)}' | sort -n | awk -v k="$k" '{t[NR]=$1; if (NR==1||$2<lo) lo=$2; if (NR==1||$2>hi) hi=$2}
			END {if (NR) printf "%s: median %.4f s over %d rounds, %s-%s MiB\n", k, t[int((NR+1)/2)], NR, lo, hi}'
	done
	for k in old new; do
		awk -v k="$k" '$1==k{x=$(NF-4)} /^python3/{print $(NF-4)/x}' "$1" | sort -n | awk -v k="$k" '{a[NR]=$1; if ($1>=5) c++}
			END {if (NR) printf "per-round pickle.load/%s: median %.2f, 5x or more in %d of %d rounds\n", k, a[int((NR+1)/2)], c+0, NR}'
	done
}

log "machine"
grep -m1 'model name' /proc/cpuinfo; nproc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
date -u

on model && have replay.test && {
	log "allocator model on one core: ${ROUNDS:-3} rounds of old and new alternately (events/s)"
	for i in $(seq "${ROUNDS:-3}"); do
		for b in "$old" "$new"; do
			for args in "Replay/(training10M-mem|generated10M-mem)/ 2x" "Replay/snapshot-reuse 500x"; do
				set -- $args
				(cd replay && $one "$root/$b/replay.test" -test.run XXX -test.bench "$1" -test.benchtime "$2" -test.cpu 1) |
					awk -v b="$b" '/^Benchmark/ { for (i = 3; i < NF; i++) if ($(i+1) == "events/s") print b, $1, $i }'
			done
		done
	done | python3 -c '
import collections, statistics, sys
old, new = sys.argv[1:3]
rates = collections.defaultdict(list)
for line in sys.stdin:
    b, name, v = line.split()
    rates[name.replace("BenchmarkReplay/", ""), b].append(float(v) / 1e6)
for name in sorted({n for n, _ in rates}):
    o, w = rates[name, old], rates[name, new]
    fmt = lambda xs: " ".join("%5.1f" % x for x in xs)
    print("%-48s old %s  new %s  M/s  median ratio %.2f" % (name, fmt(o), fmt(w), statistics.median(w) / statistics.median(o)))
' "$old" "$new"
}

on import && have tracer && {
	log "tracer import (old, new) vs python's pickle.load"
	if [ -x "$new/torchsnap.test" ] && [ ! -s /tmp/big.pickle ]; then
		(cd record/torchsnap && TORCHSNAP_GEN=/tmp/big.pickle TORCHSNAP_GEN_EVENTS=2500000 "$root/$new/torchsnap.test" \
			-test.run TestSyntheticSnapshot -test.count 1 >/dev/null)
	fi
	[ -s /tmp/ms10.pickle ] || python3 record/torchsnap/testdata/scale_snapshot.py \
		testdata/snapshots/multistream__default__seed1.pickle /tmp/ms10.pickle 10 >/dev/null
	# A real training run's snapshot of about 10 MB (a new frames list per
	# trace entry, which the scaled one lacks); needs the GPU.
	[ -s /tmp/real10.pickle ] || python3 testdata/bench/real_snapshot.py /tmp/real10.pickle 10 || true
	ls -l /tmp/big.pickle /tmp/ms10.pickle /tmp/real10.pickle
	sync; echo 1 >/proc/sys/vm/drop_caches 2>/dev/null # binaries as a user's first run finds them
	for f in /tmp/real10.pickle /tmp/ms10.pickle /tmp/big.pickle; do
		[ -s "$f" ] || continue
		"$new/tracer" import "$f" -o /tmp/ab-warm.arrows >/dev/null 2>&1 # the input in the page cache
		for i in $(seq "${ROUNDS:-5}"); do
			tm "old tracer import $f" "$old/tracer" import "$f" -o /tmp/ab-old.arrows
			tm "new tracer import $f" "$new/tracer" import "$f" -o /tmp/ab-new.arrows
			tm "python3 pickle.load $f" python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$f"
		done 2>&1 | tee /tmp/ab-rounds.txt
		cmp /tmp/ab-old.arrows /tmp/ab-new.arrows && echo "old and new traces of $f are identical"
		summarize /tmp/ab-rounds.txt
	done
}

on record && have record.test && {
	log "recording cost, sim device: old, new, old, new"
	for b in "$old" "$new" "$old" "$new"; do
		echo "== $b"
		(cd record && "$root/$b/record.test" -test.run XXX -test.bench 'RecordDrive' -test.benchtime 2000x -test.count 2 | grep Benchmark)
	done
	if nvidia-smi >/dev/null 2>&1; then
		log "recording cost, our allocator on the GPU: old, new, old, new"
		for b in "$old" "$new" "$old" "$new"; do
			echo "== $b"
			(cd record && TRACER_GPU=1 "$root/$b/record.test" -test.run XXX -test.bench 'RecordDrive' -test.benchtime 2000x -test.count 2 | grep Benchmark)
		done
	fi
}
log "done"; date -u
