#!/usr/bin/env bash
# The import's annotation and validation (issue 22) of two tracer builds
# side by side, on any machine with the binaries (no Go, no torch needed):
#
#   testdata/gpu/annot-ab.sh OLD/tracer NEW/tracer SNAPSHOT.pickle...
#
# For each snapshot it imports it ROUNDS times (default 5) with each build in
# turn, TRACER_STAGES=1, and prints per build: the least of the import's
# wall (the command's stage), the annotate stage's thread CPU, the
# validate stage's own goroutine CPU, the end of validate less the end of
# annotate (negative: validate ends first; the largest of the rounds), and
# the range of the annotate thread's and validate goroutine's minor faults;
# and the median and highest peak RSS (/usr/bin/time's).
set -u
[ $# -ge 3 ] || { echo "usage: annot-ab.sh OLD/tracer NEW/tracer SNAPSHOT.pickle..." >&2; exit 2; }
old=$1 new=$2
shift 2
ROUNDS=${ROUNDS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| snapshot | build | import wall ms | annotate CPU ms | its faults | validate CPU ms | its faults | validate end - annotate end ms | peak MiB (median, highest) |"
echo "|---|---|---|---|---|---|---|---|---|"
for in in "$@"; do
	for ((r = 0; r < ROUNDS; r++)); do
		for b in old new; do
			bin=$old
			[ $b = new ] && bin=$new
			TRACER_STAGES=1 /usr/bin/time -f 'TIME %M' "$bin" import "$in" -o "$work/t.trace" 2>"$work/err" >/dev/null
			w=$(sed -n 's/^tracer: stages: \([0-9.]*\) ms from main to the end$/\1/p' "$work/err")
			a=$(sed -n 's/.*) annotate: CPU ms \([0-9.]*\) .* to \([0-9.]*\);.*minor faults \([0-9]*\).*/\1 \2 \3/p' "$work/err")
			v=$(sed -n 's/.*) validate: CPU ms \([0-9.]*\) .* to \([0-9.]*\);.*minor faults \([0-9]*\).*/\1 \2 \3/p' "$work/err")
			m=$(sed -n 's/^TIME //p' "$work/err")
			echo "$w $a $v $m" >>"$work/$b"
		done
	done
	for b in old new; do
		awk -v name="$(basename "$in")" -v b=$b '
			function lo(a, n,  i, x) { x = a[1]; for (i = 2; i <= n; i++) if (a[i] < x) x = a[i]; return x }
			function hi(a, n,  i, x) { x = a[1]; for (i = 2; i <= n; i++) if (a[i] > x) x = a[i]; return x }
			{ n++; w[n] = $1; ac[n] = $2; af[n] = $4; vc[n] = $5; vf[n] = $7; d[n] = $6 - $3; m[n] = $8 / 1024 }
			END {
				for (i = 1; i <= n; i++) { s[i] = m[i]; for (j = i; j > 1 && s[j-1] > s[j]; j--) { t = s[j]; s[j] = s[j-1]; s[j-1] = t } }
				printf "| %s | %s | %.1f | %.1f | %d-%d | %.1f | %d-%d | %+.1f | %.1f, %.1f |\n", name, b, lo(w, n), lo(ac, n), lo(af, n), hi(af, n), lo(vc, n), lo(vf, n), hi(vf, n), hi(d, n), s[int((n + 1) / 2)], s[n]
			}' "$work/$b"
	done
	rm -f "$work/old" "$work/new"
done
