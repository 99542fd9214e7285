"""Ground truth for what-if replays: one PyTorch program, run once per allocator setting.

usage: python3 programs.py PROGRAM OUTDIR
  environment: CONF_TAG (the setting's name in the output files), PYTORCH_CUDA_ALLOC_CONF,
  TRACER_FRACTION (set_per_process_memory_fraction on every device used), RANK/WORLD_SIZE
  (set by the ddp program for its ranks), TRACER_STACKS=1 (record Python stacks).

Each run records its allocator history from before the first allocation (no stacks: the pairs
test compares requests and outcomes, and stacks would make the files large), dumps
PROGRAM__TAG[.rankN].pickle, and writes PROGRAM__TAG[.rankN].stats.json with the whole
torch.cuda.memory_stats() of every device it used, the settings it ran with and the GPU.

Every program makes the same requests whatever the allocator does (sizes, streams and order
depend on nothing the allocator decides), except oom_retry, which catches an OOM and retries
smaller: its request stream is the allocator's answer, and pairs_test reports it so.
"""
import json
import os
import random
import sys
import time

import torch

PROGRAM, OUTDIR = sys.argv[1], sys.argv[2]
TAG = os.environ.get("CONF_TAG", "default")
FRACTION = os.environ.get("TRACER_FRACTION")
LIMIT = os.environ.get("TRACER_LIMIT_BYTES")  # a limit in bytes, made a fraction of each device's memory
RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))


def devices_of(program):
    if program == "two_gpu":
        return [0, 1]
    if program == "ddp":
        return [RANK]
    return [0]


def start(devs):
    global FRACTION
    torch.cuda.init()
    torch.cuda.set_device(devs[0])
    for d in devs:
        if LIMIT:
            FRACTION = repr(int(LIMIT) / torch.cuda.get_device_properties(d).total_memory)
        if FRACTION:
            torch.cuda.set_per_process_memory_fraction(float(FRACTION), d)
    torch.manual_seed(0)
    random.seed(0)
    # TRACER_STACKS=1 records Python stacks too, to find where two runs' requests part.
    context = "all" if os.environ.get("TRACER_STACKS") else None
    torch.cuda.memory._record_memory_history(enabled="all", context=context, stacks="python",
                                             max_entries=4_000_000)


# ---- programs ----------------------------------------------------------------------------

def hf_train():
    """A Llama-shaped transformer from a config (random weights): bf16 autocast, gradient
    checkpointing, two micro-batches accumulated per optimizer step, varying sequence length."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=8000, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=1024,
                      attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).cuda()
    model.gradient_checkpointing_enable()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lengths = [128, 384, 256, 512, 192, 448, 320, 64]
    for step in range(4):
        for micro in range(2):
            n = lengths[(2 * step + micro) % len(lengths)]
            ids = torch.randint(0, cfg.vocab_size, (4, n), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss / 2
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def compile_ro():
    """torch.compile(mode="reduce-overhead"): CUDA graph trees in a private pool, three shapes."""
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024),
                                torch.nn.GELU(), torch.nn.Linear(1024, 1024)).cuda()
    fn = torch.compile(model, mode="reduce-overhead", dynamic=False)
    outs = []
    with torch.no_grad():
        for it in range(6):
            for bs in (64, 256, 1024):
                y = fn(torch.randn(bs, 1024, device="cuda"))
                outs.append(y.sum().item())
    del fn
    torch._dynamo.reset()
    torch.cuda.empty_cache()


def cuda_graph():
    """torch.cuda.graph: two captures with their own pools, replays, one graph destroyed, then
    empty_cache, then a capture that shares the first graph's pool."""
    model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048)).cuda()
    static_x = torch.randn(512, 2048, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g1 = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g1):
        y1 = model(static_x)
    g2 = torch.cuda.CUDAGraph()
    big_x = torch.randn(2048, 2048, device="cuda")
    with torch.no_grad(), torch.cuda.graph(g2):
        y2 = model(big_x) * 2
    for _ in range(5):
        static_x.copy_(torch.randn(512, 2048, device="cuda"))
        g1.replay()
        g2.replay()
    keep = y1.clone()
    del g2, y2
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    g3 = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g3, pool=g1.pool()):
        y3 = model(static_x) + 1
    g3.replay()
    tmp = [torch.empty(random.randint(1, 64) << 20, dtype=torch.uint8, device="cuda") for _ in range(8)]
    del tmp, g1, g3, y1, y3
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return keep


def mempool():
    """torch.cuda.MemPool with use_mem_pool, interleaved with default-pool work, then the pool
    dropped and the cache emptied."""
    pool = torch.cuda.MemPool()
    outside = []
    inside = []
    for i in range(40):
        n = random.randint(1, 48) << 20
        if i % 3 == 0:
            with torch.cuda.use_mem_pool(pool):
                inside.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        else:
            outside.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        if i % 5 == 4:
            outside.pop(random.randrange(len(outside)))
            if inside:
                inside.pop(0)
    with torch.cuda.use_mem_pool(pool):
        small = [torch.empty(random.randint(1, 4000) * 256, dtype=torch.uint8, device="cuda") for _ in range(200)]
    del small[::2]
    del inside, small
    torch.cuda.synchronize()
    del pool
    torch.cuda.empty_cache()
    return outside


def ddp():
    """DistributedDataParallel over two GPUs (one process per rank, NCCL), five steps."""
    import torch.distributed as dist
    dist.init_process_group("nccl", rank=RANK, world_size=WORLD, device_id=torch.device("cuda", RANK))
    model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(2048, 2048), torch.nn.GELU())]).cuda()
    ddp_model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[RANK])
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.01)
    for step, bs in enumerate([64, 256, 128, 512, 32]):
        x = torch.randn(bs, 2048, device="cuda")
        ddp_model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()


def two_gpu():
    """One process on two GPUs: a model split across cuda:0 and cuda:1 (activations copied
    between them), and independent churn on each."""
    a = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.GELU()).to("cuda:0")
    b = torch.nn.Sequential(torch.nn.Linear(4096, 2048), torch.nn.GELU()).to("cuda:1")
    opt = torch.optim.Adam(list(a.parameters()) + list(b.parameters()))
    for bs in (128, 512, 256, 64, 384):
        x = torch.randn(bs, 2048, device="cuda:0")
        h = a(x).to("cuda:1")
        b(h).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        junk = [torch.empty(random.randint(1, 32) << 20, dtype=torch.uint8, device=f"cuda:{random.randint(0, 1)}")
                for _ in range(6)]
        del junk
    torch.cuda.synchronize("cuda:0")
    torch.cuda.synchronize("cuda:1")


def oom_retry():
    """A training loop that catches CUDA OOM, empties the cache and retries with half the batch."""
    model = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 4096)).cuda()
    bs = 8192
    done = 0
    while done < 6 and bs >= 16:
        try:
            x = torch.randn(bs, 4096, device="cuda")
            model(x).square().mean().backward()
            model.zero_grad(set_to_none=True)
            done += 1
        except torch.OutOfMemoryError:
            x = None
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            bs //= 2
    print("oom_retry: final batch", bs, "steps", done)


def empty_cache_loop():
    """Phases of allocations with torch.cuda.empty_cache() between them."""
    keep = []
    for phase in range(12):
        ts = [torch.empty(random.randint(1, 40) << 20, dtype=torch.uint8, device="cuda") for _ in range(10)]
        ts += [torch.empty(random.randint(1, 900) * 1024, dtype=torch.uint8, device="cuda") for _ in range(30)]
        keep.append(ts[random.randrange(len(ts))])
        del ts
        if phase % 3 != 2:
            torch.cuda.empty_cache()
    return keep


def small_tensors():
    """The seed experiment at small scale: 30k tensors of 129 floats, every other freed, then
    large requests that the freed holes cannot serve."""
    ts = [torch.empty(129, device="cuda") for _ in range(30_000)]
    del ts[::2]
    big = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]
    more = [torch.empty(random.randint(1, 512), device="cuda") for _ in range(10_000)]
    return ts, big, more


def multistream():
    """Allocations on two side streams, record_stream and frees across streams."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    keep = []
    for i in range(150):
        with torch.cuda.stream(s1 if i % 2 else s2):
            t = torch.randn(random.randint(1000, 3_000_000), device="cuda")
        torch.cuda.current_stream().wait_stream(s1)
        torch.cuda.current_stream().wait_stream(s2)
        u = t * 2
        t.record_stream(torch.cuda.current_stream())
        del t
        if i % 3 == 0:
            keep.append(u)
        w = torch.empty(random.randint(1000, 2_000_000), device="cuda")
        with torch.cuda.stream(s1):
            w2 = torch.empty(random.randint(1000, 2_000_000), device="cuda")
        del w, w2
    torch.cuda.synchronize()
    return keep


def churn():
    """Random 1 KB - 96 MB buffers kept and dropped at random, sizes spread across both pools
    and past max_split_size_mb."""
    held = []
    for i in range(1500):
        if random.random() < 0.3:
            n = random.randint(1, 1000) * 1024
        else:
            n = random.randint(1, 96) << 20 if random.random() < 0.2 else random.randint(1, 8000) * 1024
        held.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        if len(held) > 40 or random.random() < 0.4:
            held.pop(random.randrange(len(held)))
    return held


PROGRAMS = dict(hf_train=hf_train, compile_ro=compile_ro, cuda_graph=cuda_graph, mempool=mempool, ddp=ddp,
                two_gpu=two_gpu, oom_retry=oom_retry, empty_cache_loop=empty_cache_loop,
                small_tensors=small_tensors, multistream=multistream, churn=churn)


def main():
    devs = devices_of(PROGRAM)
    start(devs)
    t0 = time.time()
    error = None
    try:
        keep = PROGRAMS[PROGRAM]()
    except torch.OutOfMemoryError as e:  # an uncaught OOM: the history up to it is still ground truth
        error = str(e).splitlines()[0]
    for d in devs:
        torch.cuda.synchronize(d)
    name = f"{PROGRAM}__{TAG}" + (f".rank{RANK}" if PROGRAM == "ddp" else "")
    torch.cuda.memory._dump_snapshot(os.path.join(OUTDIR, name + ".pickle"))
    out = dict(program=PROGRAM, tag=TAG, conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), fraction=FRACTION,
               rank=RANK if PROGRAM == "ddp" else None, error=error, torch=torch.__version__,
               seconds=round(time.time() - t0, 2),
               devices={str(d): dict(name=torch.cuda.get_device_name(d),
                                     total_memory=torch.cuda.get_device_properties(d).total_memory,
                                     memory_stats=torch.cuda.memory_stats(d)) for d in devs})
    with open(os.path.join(OUTDIR, name + ".stats.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    s = out["devices"][str(devs[0])]["memory_stats"]
    print(name, "reserved_peak", s.get("reserved_bytes.all.peak"), "allocated_peak", s.get("allocated_bytes.all.peak"),
          "device_allocs", s.get("num_device_alloc"), "retries", s.get("num_alloc_retries"),
          "ooms", s.get("num_ooms"), "error", error, "s", out["seconds"], flush=True)


main()
