#!/usr/bin/env bash
# The import's critical path (issue 22) of two tracer builds side by side,
# on any machine with the binaries (no Go, no torch needed), both built with
# the stage line "decode, the decoder's thread" (17a8df2 or later):
#
#   testdata/gpu/import-ab.sh OLD/tracer NEW/tracer SNAPSHOT.pickle...
#
# For each snapshot it imports it ROUNDS times (default 5) with each build in
# turn, TRACER_STAGES=1, and prints per build: the least of the import's
# wall (the command's stage), of the decode stage's end (a spilled import's
# decode runs on one core: the floor under its wall) and of the import's wall
# after it (the start state, annotation, validation and writer that follow
# it), the decoder's own thread CPU up to the first
# region (the head's work on its core), the first sequential part's wall
# (the head as the import waits for it), the annotate stage's thread CPU
# and the validate stage's own goroutine CPU, each with the range of its
# minor faults; the CPU of the longest of validation's parts; the end of validate less the end of annotate (negative:
# validate ends first; the largest of the rounds); and the median and
# highest peak RSS (/usr/bin/time's); and the whole process's wall, least and
# median, from a second import each round without TRACER_STAGES or
# /usr/bin/time (exec to exit, as a user waits for it: bash's EPOCHREALTIME
# around the command). Each import writes a new file, as a first import
# does: the last round's output is removed before it.
set -u
[ $# -ge 3 ] || { echo "usage: import-ab.sh OLD/tracer NEW/tracer SNAPSHOT.pickle..." >&2; exit 2; }
old=$1 new=$2
shift 2
ROUNDS=${ROUNDS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| snapshot | build | import wall ms | decode end ms | after the decode ms | decoder's thread CPU ms | head wall ms | annotate CPU ms | its faults | validate CPU ms | its faults | longest validation part CPU ms | validate end - annotate end ms | peak MiB (median, highest) | process wall ms (least, median) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for in in "$@"; do
	for ((r = 0; r < ROUNDS; r++)); do
		for b in old new; do
			bin=$old
			[ $b = new ] && bin=$new
			rm -f "$work/t.trace" # a first import's: replacing the last round's output frees its pages on the critical path
			TRACER_STAGES=1 /usr/bin/time -f 'TIME %M' "$bin" import "$in" -o "$work/t.trace" 2>"$work/err" >/dev/null
			w=$(sed -n 's/^tracer: stages: \([0-9.]*\) ms from main to the end$/\1/p' "$work/err")
			th=$(sed -n "s/.*decoder's thread, bytes [0-9-]*: CPU ms \([0-9.]*\) .*/\1/p" "$work/err")
			hw=$(sed -n 's/.*decode, sequential, bytes 0-[0-9]*: CPU ms [0-9.]* (the process.s); wall ms from \([0-9.]*\) to \([0-9.]*\);.*/\1 \2/p' "$work/err" | awk '{print $2-$1}')
			a=$(sed -n 's/.*) annotate: CPU ms \([0-9.]*\) .* to \([0-9.]*\);.*minor faults \([0-9]*\).*/\1 \2 \3/p' "$work/err")
			v=$(sed -n 's/.*) validate: CPU ms \([0-9.]*\) .* to \([0-9.]*\);.*minor faults \([0-9]*\).*/\1 \2 \3/p' "$work/err")
			vp=$(sed -n 's/.*) validate, part [0-9]* of [0-9]*: CPU ms \([0-9.]*\) .*/\1/p' "$work/err" | sort -n | tail -1)
			m=$(sed -n 's/^TIME //p' "$work/err")
			de=$(sed -n 's/.*) decode: CPU ms [0-9.]* (the process.s); wall ms from [0-9.]* to \([0-9.]*\);.*/\1/p' "$work/err")
			rm -f "$work/t.trace"
			t0=$EPOCHREALTIME
			"$bin" import "$in" -o "$work/t.trace" >/dev/null 2>&1
			t1=$EPOCHREALTIME
			pw=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) * 1000 }')
			echo "${w:--1} ${th:--1} ${hw:--1} ${a:--1 0 0} ${v:--1 0 0} ${m:-0} ${vp:--1} $pw ${de:--1}" >>"$work/$b"
		done
	done
	for b in old new; do
		awk -v name="$(basename "$in")" -v b=$b '
			function lo(a, n,  i, x) { x = a[1]; for (i = 2; i <= n; i++) if (a[i] < x) x = a[i]; return x }
			function hi(a, n,  i, x) { x = a[1]; for (i = 2; i <= n; i++) if (a[i] > x) x = a[i]; return x }
			{ n++; w[n] = $1; th[n] = $2; hw[n] = $3; ac[n] = $4; af[n] = $6; vc[n] = $7; vf[n] = $9; d[n] = $8 - $5; m[n] = $10 / 1024; vp[n] = $11; pw[n] = $12; de[n] = $13; tl[n] = ($13 < 0 ? -1 : $1 - $13) }
			END {
				for (i = 1; i <= n; i++) { s[i] = m[i]; for (j = i; j > 1 && s[j-1] > s[j]; j--) { t = s[j]; s[j] = s[j-1]; s[j-1] = t } }
				for (i = 1; i <= n; i++) { q[i] = pw[i]; for (j = i; j > 1 && q[j-1] > q[j]; j--) { t = q[j]; q[j] = q[j-1]; q[j-1] = t } }
				printf "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %d-%d | %.1f | %d-%d | %.1f | %+.1f | %.1f, %.1f | %.1f, %.1f |\n", name, b, lo(w, n), lo(de, n), lo(tl, n), lo(th, n), lo(hw, n), lo(ac, n), lo(af, n), hi(af, n), lo(vc, n), lo(vf, n), hi(vf, n), lo(vp, n), hi(d, n), s[int((n + 1) / 2)], s[n], q[1], q[int((n + 1) / 2)]
			}' "$work/$b"
	done
	rm -f "$work/old" "$work/new"
done
