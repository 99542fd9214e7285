#!/usr/bin/env bash
# One run of programs.py for make.sh: run_one.sh OUTDIR PROGRAM TAG CONF LIMIT GPU NGPU
# ("-" for an empty CONF or LIMIT). Prints the run's summary line.
set -u
out=$1 prog=$2 tag=$3 conf=$4 limit=$5 gpu=$6 ngpu=$7
here=$(cd "$(dirname "$0")" && pwd)
[ "$conf" = - ] && conf=
env=(CONF_TAG="$tag" PYTORCH_CUDA_ALLOC_CONF="$conf")
[ "$limit" != - ] && env+=(TRACER_LIMIT_BYTES="$limit")
log=$out/${prog}__${tag}.log
case $prog in
ddp)
	[ "$ngpu" -ge 2 ] || exit 0
	port=$((29500 + RANDOM % 2000))
	for r in 0 1; do
		env "${env[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r \
			timeout 300 python3 "$here/programs.py" ddp "$out" >"$out/${prog}__${tag}.rank$r.log" 2>&1 &
	done
	wait
	tail -qn 1 "$out/${prog}__${tag}".rank*.log ;;
two_gpu)
	[ "$ngpu" -ge 2 ] || exit 0
	env "${env[@]}" timeout 300 python3 "$here/programs.py" "$prog" "$out" >"$log" 2>&1
	tail -n 1 "$log" ;;
*)
	env "${env[@]}" CUDA_VISIBLE_DEVICES=$gpu timeout 300 python3 "$here/programs.py" "$prog" "$out" >"$log" 2>&1
	tail -n 1 "$log" ;;
esac
