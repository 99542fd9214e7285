#!/usr/bin/env bash
# The block numbering in parts (issue 22, branch number) against an older
# build, on the GPU machine's host: the many-small-tensor snapshot and the
# seed experiment at full scale (testdata/bench/scale_snapshots.py, torch +
# CUDA), or the snapshots named in EXTRA without them. For each, ROUNDS
# rounds (3), builds alternating, at all the host's cores:
#   - the import's stage table (TRACER_STAGES=1): annotate's wall against
#     its goroutine's CPU (the annotation's replay; its reader, which
#     numbers, is what made the wall longer);
#   - the replay command's stage table, recorded settings and
#     expandable_segments:True: read / numbering / model / analysis CPU ms
#     (numbering in parts: its longest part's, the parts' lists in read);
#   - with NEW_TEST (go test -c -o .dev/bin/replay.test ./replay of the
#     new build), BenchmarkReplay/trace-number (one part, one core) and
#     trace-number-parts2/4 (wall and CPU events/s at all the cores).
#
#   testdata/gpu/number-ab.sh OLD/tracer NEW/tracer     # writes $OUT/number-ab.md
set -u
old=$(realpath "$1") new=$(realpath "$2")
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/number-ab}
ROUNDS=${ROUNDS:-3}
NEW_TEST=${NEW_TEST:+$(realpath "$NEW_TEST")}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
md=$OUT/number-ab.md
echo "# numbering in parts, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores" >"$md"
read -r -a snaps <<<"${EXTRA:-}"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	for kind in small seed; do
		n=${SMALL_N:-450000}
		[ $kind = seed ] && n=${SEED_N:-4000000}
		python3 testdata/bench/scale_snapshots.py $kind "$work/$kind.pickle" "$n" >&2 && snaps+=("$work/$kind.pickle")
	done
fi
for f in "${snaps[@]}"; do
	name=$(basename "$f" .pickle)
	echo -e "\n## $name\n" >>"$md"
	for r in $(seq "$ROUNDS"); do
		for b in old new; do
			bin=$old
			[ $b = new ] && bin=$new
			TRACER_STAGES=1 "$bin" import "$f" -o "$work/$name.$b.trace" 2>"$work/stages" >/dev/null
			sed -n "s/^tracer: import stage ([^)]*) \(annotate\|validate\|write\|decode\): /import $b: \1: /p;s/^tracer: stages: /import $b: whole: /p" "$work/stages" >>"$md"
		done
	done
	cmp -s "$work/$name.old.trace" "$work/$name.new.trace" && echo "traces byte-identical" >>"$md" || echo "TRACES DIFFER" >>"$md"
	for conf in "" "expandable_segments:True"; do
		args=(replay "$work/$name.new.trace")
		[ -n "$conf" ] && args+=(--conf "$conf")
		for r in $(seq "$ROUNDS"); do
			for b in old new; do
				bin=$old
				[ $b = new ] && bin=$new
				TRACER_STAGES=1 "$bin" "${args[@]}" 2>&1 >/dev/null | sed -n "s/^tracer: stages /replay ${conf:-recorded} $b: /p" >>"$md"
			done
		done
	done
	if [ -n "$NEW_TEST" ]; then
		(cd replay && TRACER_REPLAY_TRACE=$work/$name.new.trace "$NEW_TEST" -test.run XXX \
			-test.bench 'Replay/trace-number' -test.benchtime 3x -test.count "$ROUNDS" -test.cpu "$(nproc)") |
			grep trace-number >>"$md"
	fi
done
cat "$md"
