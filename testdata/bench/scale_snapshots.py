"""The two scale snapshots of issue 22, recorded on the GPU with PyTorch's
memory history on:

  small   many small tensors: ALLOCS tensors of 1-64 KiB (default 450,000),
          every third one freed as it goes, so about 300k stay live: about
          800k trace entries, with python stacks, as a real program's
  seed    the seed experiment at full scale: N tensors of 129 floats
          (default 4,000,000), every other one freed, then one large
          request (half the free memory). No stacks: a history of 8M
          entries with stacks takes longer to dump than the run allows.

usage: python3 scale_snapshots.py small|seed OUT.pickle [COUNT]
Prints one line: the file, the tensors made and its size.
"""
import os
import sys

import torch

kind, out = sys.argv[1], sys.argv[2]
dev = torch.device("cuda:0")


def small(n):
    keep = []
    for i in range(n):
        t = torch.empty(256 * (1 + i % 64), dtype=torch.uint8, device=dev)
        if i % 3 != 2:
            keep.append(t)
        # else: t is freed at the next iteration, as a temporary is
    return keep


def seed(n):
    ts = [torch.empty(129, dtype=torch.float32, device=dev) for _ in range(n)]
    del ts[1::2]
    free, _ = torch.cuda.mem_get_info()
    big = torch.empty(free // 2, dtype=torch.uint8, device=dev)
    return ts, big


if kind == "small":
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 450_000
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=4 * count)
    live = small(count)
elif kind == "seed":
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 4_000_000
    torch.cuda.memory._record_memory_history(enabled="all", context=None, max_entries=3 * count)
    live = seed(count)
else:
    sys.exit(f"scale_snapshots.py: unknown kind {kind!r} (want small or seed)")
torch.cuda.synchronize()
torch.cuda.memory._dump_snapshot(out)
torch.cuda.memory._record_memory_history(enabled=None)
del live
print(f"{out}: {count} tensors, {os.path.getsize(out) / 1e6:.1f} MB")
