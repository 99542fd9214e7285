"""More ground-truth workloads for cases the first set lacks: explicit
empty_cache, garbage collection under a memory fraction, expandable segments
with max_split_size_mb, roundup lists, CUDA graph private pools, OOM recovery
through release_available_cached_blocks, record_function phases. Same harness and output as
workloads.py:

    CONF_TAG=TAG PYTORCH_CUDA_ALLOC_CONF=CONF [SEED=N] [TRACER_FRACTION=F] \
        python3 workloads_extra.py WORKLOAD OUTDIR
"""
import json
import os
import random
import sys
import time

import torch

name, outdir = sys.argv[1], sys.argv[2]
conf_tag = os.environ.get("CONF_TAG", "default")
max_entries = int(os.environ.get("TRACER_MAX_ENTRIES", "2000000"))
dev = torch.device("cuda:0")
torch.cuda.init()
frac = os.environ.get("TRACER_FRACTION")
if frac:
    torch.cuda.set_per_process_memory_fraction(float(frac), 0)
SEED = int(os.environ.get("SEED", "0"))
torch.manual_seed(SEED)
random.seed(SEED)

torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                         max_entries=max_entries)


def empty_cache():
    """Allocations of mixed sizes, frees, explicit empty_cache calls between phases."""
    keep = []
    for phase in range(4):
        bufs = [torch.empty(random.randint(1, 40) * 1_000_003, dtype=torch.uint8, device=dev) for _ in range(30)]
        small = [torch.empty(random.randint(1, 200_000), dtype=torch.uint8, device=dev) for _ in range(50)]
        keep.append(bufs[0])
        del bufs, small
        torch.cuda.empty_cache()
    return keep


def churn():
    """Random sizes 1 KB to 64 MB, random frees; under a fraction this exercises GC and retries."""
    held = []
    try:
        for i in range(3000):
            size = int(2 ** random.uniform(10, 26))
            held.append(torch.empty(size, dtype=torch.uint8, device=dev))
            if len(held) > 40 or random.random() < 0.4:
                held.pop(random.randrange(len(held)))
    except torch.OutOfMemoryError:
        pass
    return held[:5]


def graphs():
    """A CUDA graph capture: its allocations go to a private pool."""
    x = torch.randn(1024, 1024, device=dev)
    w = torch.randn(1024, 1024, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            y = (x @ w).relu()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = (x @ w).relu() + 1
        z = y.sum(0)
    for _ in range(3):
        x.copy_(torch.randn(1024, 1024, device=dev))
        g.replay()
    after = [torch.empty(random.randint(1, 4) << 20, dtype=torch.uint8, device=dev) for _ in range(10)]
    return [y, z, after, g]


def mlp_phases():
    """mlp_train with its forward and backward passes in record_function
    scopes, beside the optimizer's own (external_annotations: phases)."""
    from torch.profiler import record_function
    model = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(2048, 2048), torch.nn.GELU())],
                                torch.nn.Linear(2048, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters())
    for step in range(8):
        bs = random.choice([32, 100, 256, 500])
        x = torch.randn(bs, 2048, device=dev)
        with record_function("forward"):
            loss = model(x).logsumexp(-1).mean()
        with record_function("backward"):
            loss.backward()
        opt.step()
        opt.zero_grad()


W = dict(empty_cache=empty_cache, churn=churn, graphs=graphs, mlp_phases=mlp_phases)

t0 = time.time()
keep = W[name]()
torch.cuda.synchronize()
tag = f"{name}__{conf_tag}" + (f"__seed{SEED}" if SEED else "")
torch.cuda.memory._dump_snapshot(os.path.join(outdir, tag + ".pickle"))
stats = torch.cuda.memory_stats()
keys = ["allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
        "reserved_bytes.all.peak", "active_bytes.all.peak", "requested_bytes.all.peak",
        "inactive_split_bytes.all.peak", "num_alloc_retries", "num_ooms", "num_device_alloc",
        "num_device_free", "segment.all.peak", "segment.all.current", "allocation.all.allocated",
        "oversize_allocations.peak", "oversize_segments.peak", "num_sync_all_streams"]
out = {k: stats.get(k) for k in keys}
out.update(workload=name, conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), fraction=frac,
           torch=torch.__version__, seconds=round(time.time() - t0, 2), max_entries=max_entries,
           device=torch.cuda.get_device_name(0), total_memory=torch.cuda.get_device_properties(0).total_memory)
with open(os.path.join(outdir, tag + ".stats.json"), "w") as f:
    json.dump(out, f, indent=1)
print(tag, "peak_reserved", out["reserved_bytes.all.peak"], "dev_allocs", out["num_device_alloc"],
      "retries", out["num_alloc_retries"], "ooms", out["num_ooms"], "s", out["seconds"])
