#!/usr/bin/env bash
# Makes the extra ground-truth snapshots on a GPU machine: bash make_extra.sh OUTDIR
set -u
out=${1:?OUTDIR}
here=$(dirname "$0")
run() { env "$@"; }
W="python3 $here/workloads_extra.py"
O="python3 $here/workloads.py"
CONF_TAG=default $W empty_cache $out
CONF_TAG=gc60 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6 TRACER_FRACTION=0.02 SEED=1 $W churn $out
CONF_TAG=split64 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64 TRACER_FRACTION=0.02 SEED=2 $W churn $out
CONF_TAG=expsplit PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:64 SEED=3 $W churn $out
CONF_TAG=expfrac PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRACER_FRACTION=0.02 SEED=4 $W churn $out
CONF_TAG=default $W graphs $out
CONF_TAG=pow2list PYTORCH_CUDA_ALLOC_CONF='roundup_power2_divisions:[256:1,512:2,1024:4,>:8]' $O attention_infer $out
CONF_TAG=expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True SEED=1 $O multistream $out
CONF_TAG=expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRACER_FRACTION=0.03 SEED=1 $O oom $out
CONF_TAG=lseg30 PYTORCH_CUDA_ALLOC_CONF=large_segment_size_mb:30 $O mlp_train $out
CONF_TAG=default $W mlp_phases $out
