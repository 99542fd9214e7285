#!/usr/bin/env bash
# The side-by-side targets of issue 22, on the GPU machine (torch + CUDA,
# no Go, no network). Build here first:
#
#   go build -o .dev/bin/tracer ./cmd/tracer
#   go test -c -o .dev/bin/replay.test ./replay     # optional: the model alone
#   go test -c -o .dev/bin/record.test ./record     # optional: the import in-process
#
# then there, from the repository root: testdata/gpu/scale-targets.sh
# It records the many-small-tensor snapshot (~800k entries) and the seed
# experiment at full scale (4M tensors of 129 floats, every other freed,
# then a large request) with testdata/bench/scale_snapshots.py, and
# measures side by side:
#   - per request of each scale snapshot's request stream: PyTorch's own
#     allocator (raw_alloc/raw_delete, testdata/bench/torch_replay.py,
#     warm) against `tracer replay` (the whole command: read, model,
#     analysis) and, with .dev/bin/replay.test, the model alone
#     (BenchmarkReplay/trace-warm: the trace's blocks numbered, as the
#     command's reader numbers them on its own goroutine, timed after one
#     replay outside the measure, as PyTorch is timed after a warm pass;
#     trace-reuse: the same with its first, cold replay counted;
#     trace-byaddr: not numbered, each free's block found by address;
#     trace-number: the numbering alone), and the command's stages
#     (TRACER_STAGES=1: the CPU of its reader, numbering, model and
#     analysis, each on its own thread), under the recorded settings and
#     expandable_segments:True (target: 10x faster than PyTorch);
#   - `tracer import` against pickle.load on every snapshot in
#     testdata/snapshots and the two above (target: 0.2x), with its peak
#     RSS against the file's size (target: 2x), in alternating rounds
#     (testdata/bench/import_ratio.py).
# It writes $OUT/scale-targets.md (OUT defaults to /tmp/scale-targets) and
# stops starting steps past BUDGET_S seconds (default 420: under 8
# minutes). BASE_REPLAY_TEST names an older build's replay.test, whose
# model alone is measured beside this one's. SMALL_N and SEED_N change the tensor counts (0: leave that snapshot out); REAL_MB (e.g. "10 25") adds real training snapshots of about those sizes (testdata/bench/real_snapshot.py: about 15 s each to make, a minute each to measure); LARGE_RUNS (default 1) is how many
# rounds the import and pickle.load get on files over 50 MB; EXTRA names more
# snapshots to measure as the scale ones; CONFS (default "recorded
# expandable_segments:True") the settings replayed; ONLY_SCALE=1 leaves out the
# repository's snapshots (for a run at other sizes); without torch or CUDA it measures
# tracer alone (so it can be tried anywhere).
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
OUT=${OUT:-/tmp/scale-targets}
TRACER=${TRACER:-$root/.dev/bin/tracer}
REPLAY_TEST=${REPLAY_TEST:-$root/.dev/bin/replay.test}
RECORD_TEST=${RECORD_TEST:-$root/.dev/bin/record.test}
BASE_REPLAY_TEST=${BASE_REPLAY_TEST:-}
BUDGET_S=${BUDGET_S:-420}
SMALL_N=${SMALL_N:-450000}
SEED_N=${SEED_N:-4000000}
LARGE_RUNS=${LARGE_RUNS:-1}
start=$(date +%s)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
md=$OUT/scale-targets.md
log() { echo "scale-targets: $*" >&2; }
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
# within SECONDS CMD...: runs CMD under a timeout of at most SECONDS and
# the budget left; fails (without running it) once the budget is spent.
within() {
	local t=$1 l
	shift
	l=$(left)
	((l < t)) && t=$l
	if ((t <= 5)); then
		log "out of time, skipped: $*"
		return 124
	fi
	timeout "$t" "$@"
}

[ -x "$TRACER" ] || { echo "scale-targets: no tracer binary at $TRACER (go build -o .dev/bin/tracer ./cmd/tracer)" >&2; exit 2; }

# maxrss prints "SECONDS s MIB MiB rc=RC" for a command (testdata/bench/maxrss.c).
maxrss=$work/maxrss
if ! cc -O2 -static -o "$maxrss" testdata/bench/maxrss.c 2>/dev/null && ! cc -O2 -o "$maxrss" testdata/bench/maxrss.c; then
	echo "scale-targets: no C compiler for testdata/bench/maxrss.c" >&2
	exit 1
fi
# measure CMD...: the least wall time of up to 3 runs (1 for a big input),
# and the peak RSS of that run: "SECONDS MIB" (or "- -" on failure).
measure() {
	local runs=$1 best="" rss="" i line s m rc
	shift
	for ((i = 0; i < runs; i++)); do
		line=$(within 300 "$maxrss" "$@") || break
		read -r s _ m _ rc <<<"$line"
		[ "$rc" = "rc=0" ] || { log "failed ($rc): $*"; break; }
		if [ -z "$best" ] || awk "BEGIN{exit !($s < $best)}"; then best=$s rss=$m; fi
	done
	echo "${best:--} ${rss:--}"
}

one=""
command -v taskset >/dev/null && one="taskset -c $(($(nproc) - 1))"

torch=0
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	torch=1
else
	log "no torch with CUDA here: the scale snapshots and PyTorch's allocator are skipped"
fi

{
	echo "# issue 22 targets, side by side"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
	[ $torch = 1 ] && echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), torch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)"
	echo "tracer: $("$TRACER" version 2>/dev/null | head -1)"
} >"$md"

read -r -a snaps <<<"${EXTRA:-}"
if [ $torch = 1 ]; then
	for kind in small seed; do
		n=$SMALL_N
		[ $kind = seed ] && n=$SEED_N
		[ "$n" = 0 ] && continue
		log "recording the $kind snapshot ($n tensors)"
		if within 200 python3 testdata/bench/scale_snapshots.py $kind "$work/$kind.pickle" "$n" >&2; then
			snaps+=("$work/$kind.pickle")
		else
			echo "- the $kind snapshot could not be made in time (scale_snapshots.py $kind, $n tensors)" >>"$md"
		fi
	done
	# Real programs (REAL_MB="10 25": transformer training snapshots of
	# about those sizes, testdata/bench/real_snapshot.py), whose few live
	# blocks PyTorch's allocator serves fastest.
	for mb in ${REAL_MB:-}; do
		log "recording a real ${mb} MB snapshot"
		if within 120 python3 testdata/bench/real_snapshot.py "$work/real$mb.pickle" "$mb" >&2; then
			snaps+=("$work/real$mb.pickle")
		else
			echo "- the real $mb MB snapshot could not be made in time (real_snapshot.py)" >>"$md"
		fi
	done
fi

# Imports: the scale snapshots first (the budget may not reach them last).
{
	echo
	echo "## tracer import against pickle.load"
	echo
	echo "Rounds of one tracer import process and then one pickle.load of the same file (testdata/bench/import_ratio.py: 5 rounds, $LARGE_RUNS for files over 50 MB), so that both sample the host at the same moments: the least import (whole process, exec to exit) and its peak RSS (maxrss.c, median of the rounds), the least pickle.load (its own time, without Python's start), their ratio and the median of the rounds' own ratios; the start-up peak is \`tracer version\`'s (median of one a round), what every tracer process holds whatever its input, and the import's own memory is its peak above that."
	echo
	if [ -x "$RECORD_TEST" ]; then
		echo
		echo "Each round also times the import as pickle.load is timed and pickle.load as the import is timed (import_ratio.py --bench): BenchmarkImport of the file in a test process (in-process: least s an import, its ratio to the least pickle.load), and pickle.load as a whole Python process (python3 -c through maxrss.c, exec to exit: least s, the whole import's ratio to it, its median peak RSS)."
		echo
		echo "| snapshot | MB | events | import s | pickle.load s | import / pickle.load | the rounds' median ratio | import peak MiB | peak / file | start-up peak MiB | (peak - start-up) / file | in-process import s | in-process / pickle.load | Python process s | import process / Python process | Python process peak MiB |"
		echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	else
		echo "| snapshot | MB | events | import s | pickle.load s | import / pickle.load | the rounds' median ratio | import peak MiB | peak / file | start-up peak MiB | (peak - start-up) / file |"
		echo "|---|---|---|---|---|---|---|---|---|---|---|"
	fi
} >>"$md"
bench=()
[ -x "$RECORD_TEST" ] && bench=(--bench "$RECORD_TEST")
declare -A events
others=(testdata/snapshots/*.pickle)
[ -n "${ONLY_SCALE:-}" ] && others=()
for f in "${snaps[@]}" "${others[@]}"; do
	name=$(basename "$f" .pickle)
	bytes=$(stat -c %s "$f")
	runs=5
	((bytes > 50000000)) && runs=$LARGE_RUNS
	line=$(within 300 "$TRACER" import "$f" -o "$work/$name.arrows" 2>&1) || { log "import $f failed: $line"; continue; }
	events[$name]=$(grep -o '[0-9]* events' <<<"$line" | head -1 | cut -d' ' -f1)
	ratio=$(within 600 python3 testdata/bench/import_ratio.py "${bench[@]}" "$TRACER" $runs "$f")
	words=9
	[ ${#bench[@]} -gt 0 ] && words=14
	[ $(wc -w <<<"$ratio") = $words ] || { log "import against pickle.load of $f failed: $ratio"; continue; }
	read -r _ is ps r rm im _ _ sp bs br py pr pp <<<"$ratio"
	echo "$name $bytes $r ${br:--} ${pr:--} $im $sp" >>"$work/verdicts"
	awk -v n="$name" -v b="$bytes" -v e="${events[$name]:-?}" -v is="$is" -v ps="$ps" -v r="$r" -v rm="$rm" -v im="$im" -v sp="$sp" -v more="${bs:+ $bs | $br | $py | $pr | $pp |}" 'BEGIN {
		q = sprintf("%.2f", im * 1048576 / b)
		o = sprintf("%.2f", (im - sp) * 1048576 / b)
		printf "| %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s |%s\n", n, b / 1e6, e, is, ps, r, rm, im, q, sp, o, more }' >>"$md"
	# One more of a large file with TRACER_STAGES=1: each stage of the
	# import (below the table).
	((bytes > 50000000)) && TRACER_STAGES=1 within 300 "$TRACER" import "$f" -o "$work/$name.arrows" 2>"$work/$name.stages" >/dev/null
done
# The import targets, each against every snapshot it applies to.
if [ -s "$work/verdicts" ]; then
	{
		echo
		echo "Import targets (issue 22), each against the snapshots it applies to:"
		echo
		awk -v bench=${#bench[@]} '
			function check(ok, name) { if (ok) held++; else missed = missed " " name }
			function say(what) {
				if (held + 0 == 0 && missed == "") printf "- %s: no snapshot here applies\n", what
				else if (missed == "") printf "- %s: holds on all %d\n", what, held
				else printf "- %s: misses on%s (holds on %d)\n", what, missed, held
				held = 0; missed = "" }
			{ n[NR] = $1; b[NR] = $2; r[NR] = $3; br[NR] = $4; pr[NR] = $5; im[NR] = $6; sp[NR] = $7 }
			END {
				if (bench > 0) {
					for (i = 1; i <= NR; i++) check(pr[i] <= 0.2, n[i]); say("whole process against whole process, import at most 0.2x a Python process loading the pickle, every snapshot")
					for (i = 1; i <= NR; i++) if (b[i] >= 1e6) check(br[i] <= 0.2, n[i]); say("in-process on both sides, import at most 0.2x pickle.load, snapshots of 1 MB and more")
				}
				for (i = 1; i <= NR; i++) if (b[i] >= 1e6) check(r[i] <= 0.2, n[i]); say("the whole import process against pickle.load inside Python, at most 0.2x, snapshots of 1 MB and more")
				for (i = 1; i <= NR; i++) check((im[i] - sp[i]) * 1048576 <= 2 * b[i], n[i]); say("the import'"'"'s peak RSS above the process'"'"'s start-up peak at most 2x the file, every snapshot")
				for (i = 1; i <= NR; i++) if (2 * b[i] >= sp[i] * 1048576) check(im[i] * 1048576 <= 2 * b[i], n[i]); say("the whole peak RSS at most 2x the file, snapshots whose 2x is above the start-up peak")
			}' "$work/verdicts"
	} >>"$md"
fi
stages=("$work"/*.stages)
if [ -e "${stages[0]}" ]; then
	{
		echo
		echo "The import's stages (one more run of each file over 50 MB, TRACER_STAGES=1): CPU is the process's for a stage that runs alone (decode, and within it its sequential and parallel parts, by the bytes each decoded), the stage's own goroutine's for validate (and each of its parts), annotate and write (side by side: the longest of them is the critical path, validate's being its own CPU and its longest part's); from/to in the process's wall time; the peak RSS so far as the stage ends; a stage beside others, its thread's minor page faults (its first touches of fresh memory)."
		echo
		echo "| snapshot | stage | CPU ms | whose | from ms | to ms | peak RSS MiB | its thread's minor faults |"
		echo "|---|---|---|---|---|---|---|---|"
		for st in "${stages[@]}"; do
			n=$(basename "$st" .stages)
			sed -n 's/^tracer: import stage ([^)]*) \([^:]*\): CPU ms \([0-9.]*\) (\([^)]*\)); wall ms from \([0-9.]*\) to \([0-9.]*\); peak RSS \([0-9.]*\) MiB\(; minor faults \([0-9]*\)\)\{0,1\}$/| '"$n"' | \1 | \2 | \3 | \4 | \5 | \6 | \8 |/p' "$st"
			sed -n 's/^tracer: stages: \([0-9.]*\) ms from main to the end$/| '"$n"' | (the command) | | | 0 | \1 | | |/p' "$st"
		done
	} >>"$md"
fi

# Replays, per request: only the scale snapshots (PyTorch's yardstick
# compiles an extension and reads the trace with pyarrow: a minute each).
{
	echo
	echo "## replay per request against PyTorch's allocator"
	echo
	echo "PyTorch: torch_replay.py (raw_alloc/raw_delete of the trace's allocs and frees, warm, least of ROUNDS passes, 3 by default, each pass followed by a round of the model's benchmarks), under PYTORCH_CUDA_ALLOC_CONF. tracer replay: the whole command (read, model, analysis; wall, least of 3), per the same requests. Model: BenchmarkReplay/trace-warm (one core, per trace event: allocs, frees and their completions, segment events; the blocks numbered beforehand, as the command's reader numbers them on its own goroutine; timed after one replay outside the measure, as PyTorch is timed after its warm pass; the warm benchmarks replay the trace 3 times or about 4M events, whichever is more); first replay counted: trace-reuse, whose three timed replays include the first, which makes the model's memory; PyTorch / model: PyTorch's time a request over the model's (its time an event times the trace's events a request; each round: the same in each of the interleaved rounds, least-most); base model: trace-reuse of BASE_REPLAY_TEST, an older build, when given; by address: trace-byaddr, the model finding each free's block by address; numbering: trace-number, the reader's numbering alone. Stages: one more tracer replay with TRACER_STAGES=1, the CPU of each of the command's stages on its own thread per trace event (read, its numbering, the model with the comparison and the hand-off, the analysis; of the replay under the settings asked for, beside which a what-if runs the recorded settings' too), and that replay's wall time, to set against the command's: on many cores the command takes about its slowest stage. Target: 10× faster than PyTorch."
	echo
	echo "| snapshot | settings | requests | PyTorch ns/request | tracer replay s | tracer replay ns/request | PyTorch / tracer replay | model ns/event (warm) | PyTorch / model | PyTorch / model, each round | model ns/event, first replay counted | base model ns/event, first replay counted | model by address ns/event | numbering ns/event | stages ns/event: read / numbering / model / analysis (+ the analysis's numbering) | stages wall s | peak MiB |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} >>"$md"
for f in "${snaps[@]}"; do
	name=$(basename "$f" .pickle)
	tr=$work/$name.arrows
	[ -f "$tr" ] || continue
	for label in ${CONFS:-recorded expandable_segments:True}; do
		conf=$label
		[ "$conf" = recorded ] && conf=
		# PyTorch's passes and the model's benchmarks interleave: after each
		# of PyTorch's ROUNDS passes (default 3), torch_replay.py runs one
		# round of this build's and the base's benchmarks
		# (TORCH_REPLAY_BETWEEN), so that both see the same phases of the
		# shared host; each figure is the least time of its rounds, and the
		# rounds' own ratios are reported beside.
		bout=$work/bench.$name.$label bbase=$work/based.$name.$label
		: >"$bout"
		: >"$bbase"
		between=$work/between.sh
		# The warm benchmarks replay the trace at least 3 times and about
		# 4M events in all: a small trace's replay takes a few ms, which 3
		# replays measure with a spread of up to 2x between rounds.
		# trace-reuse keeps 3, the first of them cold.
		bt=$(((4000000 + ${events[$name]:-1} - 1) / ${events[$name]:-1}))
		((bt < 3)) && bt=3
		{
			echo "cd '$root/replay' || exit 0"
			echo "echo round >>'$bout'; echo round >>'$bbase'"
			[ -x "$REPLAY_TEST" ] && echo "TRACER_REPLAY_TRACE='$tr' TRACER_REPLAY_CONF='$conf' $one '$REPLAY_TEST' -test.run XXX -test.bench 'Replay/trace-(warm|byaddr|number)/' -test.benchtime ${bt}x -test.cpu 1 >>'$bout' 2>/dev/null; TRACER_REPLAY_TRACE='$tr' TRACER_REPLAY_CONF='$conf' $one '$REPLAY_TEST' -test.run XXX -test.bench 'Replay/trace-reuse/' -test.benchtime 3x -test.cpu 1 >>'$bout' 2>/dev/null"
			[ -n "$BASE_REPLAY_TEST" ] && [ -x "$BASE_REPLAY_TEST" ] && echo "TRACER_REPLAY_TRACE='$tr' TRACER_REPLAY_CONF='$conf' $one '$BASE_REPLAY_TEST' -test.run XXX -test.bench 'Replay/trace-reuse/' -test.benchtime 3x -test.cpu 1 >>'$bbase' 2>/dev/null"
		} >"$between"
		req=- tns=- passes=
		if line=$(PYTORCH_CUDA_ALLOC_CONF=$conf TORCH_REPLAY_BETWEEN="bash $between" within 420 python3 testdata/bench/torch_replay.py "$tr" "${ROUNDS:-3}" 2>/dev/null | tail -1); then
			req=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["events"])' "$line" 2>/dev/null || echo -)
			tns=$(python3 -c 'import json, sys; print("%.0f" % json.loads(sys.argv[1])["ns_per_event"])' "$line" 2>/dev/null || echo -)
			passes=$(python3 -c 'import json, sys; print(" ".join("%.6f" % p for p in json.loads(sys.argv[1])["passes"]))' "$line" 2>/dev/null)
		fi
		if [ ! -s "$bout" ] && [ -x "$REPLAY_TEST" ]; then # no PyTorch here: the model's rounds alone
			for ((r = 0; r < ${ROUNDS:-3}; r++)); do bash "$between"; done
		fi
		args=(replay "$tr" --json)
		[ -n "$conf" ] && args+=(--conf "$conf")
		read -r rs rm <<<"$(measure 3 "$TRACER" "${args[@]}")"
		bench=$(cat "$bout") based=$(cat "$bbase")
		# rounds: PyTorch / model in each round, "least-most".
		rounds=$(awk -v p="$passes" -v q="$req" -v e="${events[$name]:-0}" '
			$1 == "round" { r++ } $0 ~ /trace-warm\// { for (i = 1; i < NF; i++) if ($(i+1) == "events/cpu-s") m[r] = 1e9 / $i }
			END { n = split(p, ps, " "); lo = hi = ""
				for (i = 1; i <= n; i++) if (m[i] > 0 && q > 0 && e > 0) { x = ps[i] * 1e9 / q / (m[i] * e / q)
					if (lo == "" || x < lo) lo = x; if (hi == "" || x > hi) hi = x }
				if (lo != "") printf "%.1f-%.1f×", lo, hi; else print "-" }' "$bout")
		# per NAME TEXT: ns an event of benchmark NAME, the best of its runs in TEXT.
		per() { awk -v b="$1" '$0 ~ b { for (i = 1; i < NF; i++) if ($(i+1) == "events/cpu-s" && $i > best) best = $i }
			END { if (best > 0) printf "%.1f", 1e9 / best }' <<<"$2"; }
		mns=$(per trace-warm/ "$bench") cns=$(per trace-reuse/ "$bench") bns=$(per trace-byaddr/ "$bench") nns=$(per trace-number/ "$bench") ons=$(per trace-reuse/ "$based")
		mns=${mns:--} cns=${cns:--} bns=${bns:--} nns=${nns:--} ons=${ons:--}
		# TRACER_STAGES: "tracer: stages (LABEL): CPU ms: read R, numbering N,
		# model M, analysis A (its blocks numbered ahead B), finalize F; wall
		# ms W, ..." per replay (no B from builds before it); a
		# what-if's recorded replay beside it reports too, under its own
		# label: take the line whose label names the conf asked for.
		sns=- sw=-
		if st=$(TRACER_STAGES=1 within 120 "$TRACER" "${args[@]}" 2>&1 >/dev/null); then
			line=$(grep 'tracer: stages (' <<<"$st" | grep -F -- "${conf:-(}" | tail -1)
			read -r sns sw <<<"$(awk -v e="${events[$name]:-0}" '{
				for (i = 1; i <= NF; i++) { k = $i; v = $(i+1); sub(/,|;/, "", v)
					if (k == "read" || k == "numbering" || k == "model" || k == "analysis") x[k] = v
					if (k == "ahead") { sub(/\)/, "", v); ahead = sprintf("(+%.0f)", v * 1e6 / e) }
					if (k == "ms" && $(i-1) == "wall") w = v }
				if (e > 0) printf "%.0f/%.0f/%.0f/%.0f%s %.3f", x["read"] * 1e6 / e, x["numbering"] * 1e6 / e, x["model"] * 1e6 / e, x["analysis"] * 1e6 / e, ahead, w / 1e3
				else print "- -" }' <<<"$line")"
			sns=${sns:--} sw=${sw:--}
		fi
		awk -v n="$name" -v c="$label" -v q="$req" -v t="$tns" -v rs="$rs" -v rm="$rm" -v m="$mns" -v cm="$cns" -v om="$ons" -v e="${events[$name]:-0}" -v bm="$bns" -v nm="$nns" -v sn="$sns" -v sw="$sw" -v rd="$rounds" 'BEGIN {
			per = (rs != "-" && q != "-" && q > 0) ? sprintf("%.0f", rs * 1e9 / q) : "-"
			x = (per != "-" && t != "-" && per > 0) ? sprintf("%.1f×", t / per) : "-"
			mx = (m != "-" && t != "-" && q != "-" && q > 0 && e > 0) ? sprintf("%.1f×", t / (m * e / q)) : "-"
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, c, q, t, rs, per, x, m, mx, rd, cm, om, bm, nm, sn, sw, rm }' >>"$md"
	done
done
echo >>"$md"
echo "$(($(date +%s) - start)) s in all" >>"$md"
log "wrote $md"
cat "$md"
