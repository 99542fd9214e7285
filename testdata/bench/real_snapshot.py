"""A real snapshot of a size chosen in advance: a small transformer language
model trained with PyTorch's memory history on (python stacks, as
`tracer record` and most users record), dumped after as many steps as give
about SIZE_MB of pickle. The import benchmarks use it beside the scaled and
generated snapshots, which are made from a few small real ones.

usage: python3 real_snapshot.py OUT.pickle [SIZE_MB]   (default 10)
"""
import os
import sys

import torch

out = sys.argv[1]
size_mb = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
torch.manual_seed(0)
dev = torch.device("cuda:0")


def train(steps):
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(8000, 256), torch.nn.TransformerEncoder(layer, num_layers=4),
                                torch.nn.Linear(256, 8000)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for i in range(steps):
        seq = 64 + (i % 5) * 32  # varying shapes, as real batches
        x = torch.randint(0, 8000, (16, seq), device=dev)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def record(steps):
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=10_000_000)
    train(steps)
    torch.cuda.memory._dump_snapshot(out)
    torch.cuda.memory._record_memory_history(enabled=None)
    torch.cuda.empty_cache()
    return os.path.getsize(out)


probe = 10
size = record(probe)
steps = max(1, round(probe * size_mb * 1e6 / size))
size = record(steps)
print(f"{out}: {steps} steps, {size / 1e6:.1f} MB")
