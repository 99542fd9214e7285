#!/usr/bin/env bash
# The decode's one-core head (issue 22) of two tracer builds side by side,
# on any machine with the binaries (no Go, no torch needed), both built with
# the stage line "decode, the decoder's thread" (17a8df2 or later):
#
#   testdata/gpu/head-ab.sh OLD/tracer NEW/tracer SNAPSHOT.pickle...
#
# For each snapshot it imports it ROUNDS times (default 5) with each build in
# turn, TRACER_STAGES=1, and prints per build the least of: the decoder's
# own thread CPU up to the first region (the head's work on its core), the
# first sequential part's wall (the head as the import waits for it) and
# the whole import's wall (the command's stage).
set -u
[ $# -ge 3 ] || { echo "usage: head-ab.sh OLD/tracer NEW/tracer SNAPSHOT.pickle..." >&2; exit 2; }
old=$1 new=$2
shift 2
ROUNDS=${ROUNDS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
least() { sort -g | head -1; }
echo "| snapshot | build | decoder's thread CPU ms | head wall ms | import wall ms |"
echo "|---|---|---|---|---|"
for in in "$@"; do
	for ((r = 0; r < ROUNDS; r++)); do
		for b in old new; do
			bin=$old
			[ $b = new ] && bin=$new
			TRACER_STAGES=1 "$bin" import "$in" -o "$work/t.trace" 2>"$work/$b.$r" >/dev/null
		done
	done
	for b in old new; do
		th=$(cat "$work/$b".* | sed -n "s/.*decoder's thread, bytes [0-9-]*: CPU ms \([0-9.]*\) .*/\1/p" | least)
		hw=$(cat "$work/$b".* | sed -n 's/.*decode, sequential, bytes 0-[0-9]*: CPU ms [0-9.]* (the process.s); wall ms from \([0-9.]*\) to \([0-9.]*\);.*/\1 \2/p' | awk '{print $2-$1}' | least)
		w=$(cat "$work/$b".* | sed -n 's/^tracer: stages: \([0-9.]*\) ms from main to the end$/\1/p' | least)
		echo "| $(basename "$in") | $b | ${th:--} | ${hw:--} | ${w:--} |"
	done
	rm -f "$work"/old.* "$work"/new.*
done
