#!/usr/bin/env bash
# tracer replay of two builds side by side (issue 22: the read stage and
# the command's start and end), on any machine with the binaries (no Go):
#
#   testdata/gpu/replay-ab.sh OLD/tracer NEW/tracer TRACE...
#
# For each trace, under its recorded settings and expandable_segments:True,
# at GOMAXPROCS 16 and 2 (PROCS), it runs `tracer replay --json` ROUNDS
# times (default 5) with each build in turn, TRACER_STAGES=1, and prints
# per build: the least wall time (/usr/bin/time's) and user+sys, the least
# CPU of each stage's thread per event (read, numbering, model, analysis;
# of the replay under the settings asked for), the CPU per event of the
# goroutines that decode the trace beside the reader (a build without
# them: -), and the median and highest peak RSS. Copy both binaries fresh
# before (a binary just written counts its pages in the peak).
set -u
[ $# -ge 3 ] || { echo "usage: replay-ab.sh OLD/tracer NEW/tracer TRACE..." >&2; exit 2; }
old=$1 new=$2
shift 2
ROUNDS=${ROUNDS:-5}
PROCS=${PROCS:-16 2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| trace | settings | GOMAXPROCS | build | wall s | user+sys s | stages ns/event read/numbering/model/analysis | decoders ns/event | peak MiB (median; highest) |"
echo "|---|---|---|---|---|---|---|---|---|"
for in in "$@"; do
	for conf in "" expandable_segments:True; do
		for p in $PROCS; do
			rm -f "$work/old" "$work/new"
			for ((r = 0; r < ROUNDS; r++)); do
				for b in old new; do
					bin=$old
					[ $b = new ] && bin=$new
					args=(replay --json "$in")
					[ -n "$conf" ] && args+=(--conf "$conf")
					GOMAXPROCS=$p TRACER_STAGES=1 /usr/bin/time -f 'TIME %e %U %S %M' "$bin" "${args[@]}" 2>"$work/err" >/dev/null
					# The stage line of the settings asked for (a what-if
					# reports the recorded replay beside it too).
					grep 'tracer: stages (' "$work/err" | grep -F -- "(${conf:-defaults})" | tail -1 >"$work/line"
					awk '/^TIME/ { t = $2 " " ($3 + $4) " " $5 }
						FILENAME ~ /line$/ { for (i = 1; i <= NF; i++) { k = $i; v = $(i+1); sub(/,|;/, "", v)
							if (k == "read" || k == "numbering" || k == "model" || k == "analysis") x[k] = v
							if (k == "ms" && $(i-1) == "CPU" && $(i-2) == "reader:") d = v } }
						END { print t, x["read"] + 0, x["numbering"] + 0, x["model"] + 0, x["analysis"] + 0, (d == "" ? -1 : d) }' \
						"$work/err" "$work/line" >>"$work/$b"
				done
			done
			# Events: tracer info's count, for the per-event figures.
			n=$("$new" info --json "$in" 2>/dev/null | sed -n 's/.*"events": *\([0-9]*\).*/\1/p' | head -1)
			for b in old new; do
				sort -n -k3 "$work/$b" | awk -v n="${n:-0}" -v tr="$(basename "$in")" -v c="${conf:-recorded}" -v p="$p" -v b="$b" '
					function least(col,   i, m) { m = -1; for (i = 1; i <= NR; i++) if (m < 0 || v[i, col] < m) m = v[i, col]; return m }
					function per(ms) { return n > 0 ? sprintf("%.0f", ms * 1e6 / n) : "-" }
					{ for (i = 1; i <= NF; i++) v[NR, i] = $i; rss[NR] = $3 }
					END {
						mid = rss[int((NR + 1) / 2)] / 1024; hi = rss[NR] / 1024
						d = least(8)
						printf "| %s | %s | %s | %s | %.2f | %.2f | %s/%s/%s/%s | %s | %.1f; %.1f |\n", tr, c, p, b, least(1), least(2),
							per(least(4)), per(least(5)), per(least(6)), per(least(7)), (d < 0 ? "-" : per(d)), mid, hi }'
			done
		done
	done
done
