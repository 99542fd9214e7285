#!/usr/bin/env bash
# The model alone of two builds side by side, on any machine with their
# replay.test binaries (no Go):
#
#   testdata/gpu/model-ab.sh OLD/replay.test NEW/replay.test TRACE...
#
# For each trace, under its recorded settings and expandable_segments:True,
# ROUNDS rounds (default 5) of BenchmarkReplay/trace-reuse (-benchtime 3x,
# its first replay cold: the Replayer's arena made and doubled) and
# trace-warm (the same after one replay outside the measure, as
# torch_replay.py times PyTorch; a build without it: -), one core, the
# builds alternating within each round. Prints each build's least and
# median CPU ns an event, and new / old of the least. Run it from the
# repository root (the benchmark reads replay/'s testdata).
set -u
[ $# -ge 3 ] || { echo "usage: model-ab.sh OLD/replay.test NEW/replay.test TRACE..." >&2; exit 2; }
old=$(realpath "$1") new=$(realpath "$2")
shift 2
ROUNDS=${ROUNDS:-5}
one=""
if command -v taskset >/dev/null; then one="taskset -c $(($(nproc) > 3 ? 3 : $(nproc) - 1))"; fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for tr in "$@"; do
	tr=$(realpath "$tr")
	for conf in "" expandable_segments:True; do
		for _ in $(seq "$ROUNDS"); do
			for b in old new; do
				bin=$old
				[ $b = new ] && bin=$new
				(cd replay && TRACER_REPLAY_TRACE=$tr TRACER_REPLAY_CONF=$conf GOMAXPROCS=1 $one "$bin" \
					-test.run '^$' -test.bench 'BenchmarkReplay/trace-(reuse|warm)/' -test.benchtime 3x -test.cpu 1 2>/dev/null) |
					awk -v b=$b -v t="$(basename "$tr") ${conf:-recorded}" '/events\/cpu-s/ {
						split($1, n, "/"); for (i = 1; i < NF; i++) if ($(i+1) == "events/cpu-s") print t, n[2], b, 1e9 / $i }' >>"$out"
			done
		done
	done
done
sort -k1,1 -k2,2 -k3,3 -k4,4 -k5,5g "$out" | awk '
	{ k = $1 " " $2 " " $3 " " $4; v[k] = v[k] " " $5; n[k]++ }
	END {
		for (k in v) {
			m = split(substr(v[k], 2), x, " ")
			least[k] = x[1]; med[k] = x[int((m + 1) / 2)]
		}
		for (k in v) {
			split(k, f, " ")
			if (f[4] != "new") continue
			o = f[1] " " f[2] " " f[3] " old"
			printf "%s %s %s: old %s (median %s), new %.1f (median %.1f), new/old %s\n", f[1], f[2], f[3],
				(o in least) ? sprintf("%.1f", least[o]) : "-", (o in med) ? sprintf("%.1f", med[o]) : "-",
				least[k], med[k], (o in least) ? sprintf("%.3f", least[k] / least[o]) : "-"
		}
	}' | sort
