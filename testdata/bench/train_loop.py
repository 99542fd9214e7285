"""A small training loop that times itself: the yardstick for what
`tracer record -- python` adds to a program.

usage: python3 train_loop.py [STEPS] [--history]

Prints one JSON line: the steps, the loop's wall time (after a CUDA
synchronize) and seconds per step. With --history it switches on PyTorch's
own memory-history recording the way tracer's hook does (same context,
stacks and max_entries), so the three runs

    python3 train_loop.py 300                       # no recording
    python3 train_loop.py 300 --history             # PyTorch's recording, by hand
    tracer record -o t.arrows -- python3 train_loop.py 300

separate PyTorch's own cost from tracer's (the hook, the dump at exit and the
import are outside the timed loop; tracer's wall time says what they cost).
"""
import json
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else 300
if "--history" in sys.argv:
    torch.cuda.memory._record_memory_history(
        enabled="all", context="all", stacks="python", max_entries=1000000)

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 4096), torch.nn.GELU(),
    torch.nn.Linear(4096, 4096), torch.nn.GELU(),
    torch.nn.Linear(4096, 1024),
).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)


def step(i):
    x = torch.randn(64 + (i % 4) * 16, 1024, device="cuda")
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


for i in range(5):  # warm up: kernels, cuBLAS workspaces, the cache
    step(i)
torch.cuda.synchronize()
t0 = time.perf_counter()
for i in range(steps):
    step(i)
torch.cuda.synchronize()
wall = time.perf_counter() - t0
print(json.dumps({"steps": steps, "history": "--history" in sys.argv,
                  "loop_s": round(wall, 4), "ms_per_step": round(wall / steps * 1e3, 3)}))
