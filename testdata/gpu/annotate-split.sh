#!/usr/bin/env bash
# Where the import's annotation spends its CPU beyond the model's (issue
# 22), on any machine with the two binaries (no Go, no torch needed):
#
#   go build -trimpath -ldflags='-s -w' -o .dev/bin/tracer ./cmd/tracer
#   go test -c -o .dev/bin/replay.test ./replay
#
# then: testdata/gpu/annotate-split.sh SNAPSHOT.pickle...
# For each snapshot it imports it ROUNDS times (default 3) with
# TRACER_STAGES=1 and takes the least CPU of the annotate stage (its
# goroutine's thread; with that run's minor faults on the thread), then replays the trace it made in memory on one
# core (BenchmarkReplay, 3 runs each, least): trace-reuse (the model
# alone, its memory reused), trace-fresh (a fresh model each time, as the
# import makes one) and trace-annotate (fresh, with the annotation's
# options and its model sized for the peak of live blocks), all per
# event. trace-annotate against the import's stage is what the import's
# pipeline (its reader on other cores, the hand-offs, memory first
# touched) adds; trace-fresh against trace-reuse what a fresh model's
# memory costs; trace-annotate against trace-fresh the options'.
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
TRACER=${TRACER:-$root/.dev/bin/tracer}
REPLAY_TEST=${REPLAY_TEST:-$root/.dev/bin/replay.test}
ROUNDS=${ROUNDS:-3}
[ -x "$TRACER" ] && [ -x "$REPLAY_TEST" ] || { echo "annotate-split: build $TRACER and $REPLAY_TEST first (see the script's head)" >&2; exit 2; }
[ $# -gt 0 ] || { echo "usage: annotate-split.sh SNAPSHOT.pickle..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
one=""
command -v taskset >/dev/null && one="taskset -c $(($(nproc) - 1))"
echo "| snapshot | events | import's annotate CPU ms | its thread's minor faults | ns/event | trace-annotate ns/event | trace-fresh ns/event | trace-reuse ns/event |"
echo "|---|---|---|---|---|---|---|---|"
for in in "$@"; do
	tr=$work/$(basename "${in%.*}").trace
	best= faults=
	for ((r = 0; r < ROUNDS; r++)); do
		line=$(TRACER_STAGES=1 "$TRACER" import "$in" -o "$tr" 2>&1 >/dev/null | grep ' annotate: CPU ms ' | head -1)
		ms=$(sed -n 's/.* annotate: CPU ms \([0-9.]*\) .*/\1/p' <<<"$line")
		[ -n "$ms" ] || { echo "annotate-split: $in: no annotate stage reported" >&2; continue 2; }
		if [ -z "$best" ] || awk "BEGIN{exit !($ms < $best)}"; then
			best=$ms
			faults=$(sed -n 's/.*; minor faults \([0-9]*\)$/\1/p' <<<"$line")
		fi
	done
	events=$("$TRACER" info "$tr" --json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["events"])' 2>/dev/null || echo -)
	bench=$(cd replay && TRACER_REPLAY_TRACE=$tr $one "$REPLAY_TEST" -test.run XXX \
		-test.bench 'Replay/trace-(reuse|fresh|annotate)/' -test.benchtime 3x -test.cpu 1 2>/dev/null)
	# per NAME: ns an event of benchmark NAME, by its events/cpu-s.
	per() { awk -v b="$1" '$0 ~ b { for (i = 1; i < NF; i++) if ($(i+1) == "events/cpu-s" && $i > best) best = $i }
		END { if (best > 0) printf "%.1f", 1e9 / best; else printf "-" }' <<<"$bench"; }
	ns=-
	[ "$events" != - ] && ns=$(awk "BEGIN{printf \"%.1f\", $best * 1e6 / $events}")
	echo "| $(basename "$in") | $events | $best | ${faults:--} | $ns | $(per trace-annotate/) | $(per trace-fresh/) | $(per trace-reuse/) |"
done
