#!/usr/bin/env bash
# Makes the pairs of real runs on a GPU machine: every program of programs.py under every
# setting of settings.txt, each with its snapshot and whole memory_stats().
#
#   bash testdata/pairs/make.sh OUTDIR [PROGRAM...]
#
# First every program runs under defaults; the limits of the settings that need one are then
# set from that run's peaks (limit.py; retry tries four limits, retry_pick.py keeps one;
# RETRY_FINE=1 tries 2, 4, 6 and 8 MiB below the reserved peak instead). oom_retry runs
# under a 1 GiB limit in every setting. Runs go JOBS (8) at a time, spread over the GPUs;
# ddp and two_gpu need two GPUs and are skipped on one.
set -u
out=${1:?OUTDIR}
shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
programs=${*:-hf_train compile_ro cuda_graph mempool ddp two_gpu oom_retry empty_cache_loop small_tensors multistream churn}
ngpu=$(nvidia-smi -L | wc -l)
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/tracer-inductor} PYTHONUNBUFFERED=1
jobs=$out/jobs.txt
: >"$jobs"

# job PROGRAM TAG CONF LIMIT: one line of the job list.
job() { printf '%s|%s|%s|%s\n' "$@" >>"$jobs"; }

run_jobs() {
	local i=0
	while IFS='|' read -r prog tag conf limit; do
		printf '%s %s %s %s %s %s\n' "$prog" "$tag" "${conf:--}" "${limit:--}" $((i % ngpu)) "$ngpu"
		i=$((i + 1))
	done <"$jobs" | xargs -P ${JOBS:-8} -L 1 bash "$here/run_one.sh" "$out"
	: >"$jobs"
}

oom_limit=$((1 << 30))
limit_for() { # PROGRAM KIND: the limit a setting of that kind gets, from the default run's stats
	[ "$1" = oom_retry ] && { echo $oom_limit; return; }
	[ -z "$2" ] && return
	local stats=$out/$1__default.stats.json
	[ -f "$stats" ] || stats=$out/$1__default.rank0.stats.json
	python3 "$here/limit.py" "$stats" "$2"
}

# Warm the inductor cache, so that every compile_ro run loads the same compiled graphs.
case " $programs " in *" compile_ro "*)
	mkdir -p "$out/warm" && CONF_TAG=warm python3 "$here/programs.py" compile_ro "$out/warm" >"$out/warm.log" 2>&1
	rm -rf "$out/warm" ;;
esac

# A default run already in OUTDIR is kept (SETTINGS="tag ..." then makes only those settings).
for p in $programs; do
	[ -f "$out/${p}__default.stats.json" ] || [ -f "$out/${p}__default.rank0.stats.json" ] ||
		job "$p" default "" "$(limit_for "$p" "")"
done
run_jobs
while IFS='|' read -r tag conf kind; do
	case $tag in ''|'#'*|default) continue ;; esac
	case " ${SETTINGS:-$tag} " in *" $tag "*) ;; *) continue ;; esac
	for p in $programs; do
		if [ "$kind" = retry ] && [ "$p" != oom_retry ]; then # four limits; retry_pick.py keeps one
			for k in 1 2 3 4; do job "$p" "$tag$k" "$conf" "$(limit_for "$p" "retry${RETRY_FINE:+fine}$k")"; done
		else
			job "$p" "$tag" "$conf" "$(limit_for "$p" "$kind")"
		fi
	done
done <"$here/settings.txt"
run_jobs
case " ${SETTINGS:-retry} " in *" retry "*)
	for p in $programs; do [ "$p" = oom_retry ] || python3 "$here/retry_pick.py" "$out" "$p"; done ;;
esac
