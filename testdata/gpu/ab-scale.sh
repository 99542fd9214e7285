#!/usr/bin/env bash
# Two tracer builds side by side on issue 22's scale snapshots, on the GPU
# machine (torch + CUDA): the many-small-tensor snapshot and the seed
# experiment at full scale (testdata/bench/scale_snapshots.py), each
# imported by both builds in turn, then the new build's trace replayed by
# both (recorded settings and expandable_segments:True); ROUNDS rounds (3),
# builds alternating, least wall time and least peak RSS (maxrss.c) kept.
#
#   testdata/gpu/ab-scale.sh OLD/tracer NEW/tracer     # writes $OUT/ab-scale.md
set -u
old=$1 new=$2
OUT=${OUT:-/tmp/ab-scale}
ROUNDS=${ROUNDS:-3}
SMALL_N=${SMALL_N:-450000}
SEED_N=${SEED_N:-4000000}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/maxrss" testdata/bench/maxrss.c || exit 1
log=$work/log
for kind in small seed; do
	n=$SMALL_N
	[ $kind = seed ] && n=$SEED_N
	python3 testdata/bench/scale_snapshots.py $kind "$work/$kind.pickle" "$n" >&2 || exit 1
	for r in $(seq "$ROUNDS"); do
		for b in old new; do
			bin=$old
			[ $b = new ] && bin=$new
			echo "$kind import $b $("$work/maxrss" "$bin" import "$work/$kind.pickle" -o "$work/$kind.$b.trace" 2>/dev/null)" >>"$log"
		done
	done
	for conf in recorded expandable_segments:True; do
		args=()
		[ $conf != recorded ] && args=(--conf "$conf")
		for r in $(seq "$ROUNDS"); do
			for b in old new; do
				bin=$old
				[ $b = new ] && bin=$new
				echo "$kind replay-$conf $b $("$work/maxrss" "$bin" replay "$work/$kind.new.trace" "${args[@]}" 2>/dev/null)" >>"$log"
			done
		done
	done
	rm -f "$work/$kind".*.trace "$work/$kind.pickle"
done
cp "$log" "$OUT/ab-scale.log"
python3 - "$log" "$OUT/ab-scale.md" <<'PY'
import sys, collections
best = collections.defaultdict(lambda: [1e9, 1e9])
order = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 7 or f[-1] != "rc=0":
        continue
    key = (f[0], f[1], f[2])
    if key[:2] not in order:
        order.append(key[:2])
    b = best[key]
    b[0], b[1] = min(b[0], float(f[3])), min(b[1], float(f[5]))
with open(sys.argv[2], "w") as out:
    out.write("| snapshot | command | old s | new s | new / old | old peak MiB | new peak MiB |\n|---|---|---|---|---|---|---|\n")
    for k in order:
        o, n = best[k + ("old",)], best[k + ("new",)]
        out.write(f"| {k[0]} | {k[1]} | {o[0]:.3f} | {n[0]:.3f} | {n[0]/o[0]:.2f} | {o[1]:.1f} | {n[1]:.1f} |\n")
print(open(sys.argv[2]).read())
PY
