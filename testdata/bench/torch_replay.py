"""Replay a tracer trace's request stream through PyTorch's own CUDA caching
allocator (c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete) and time
it per event, warm: the yardstick for `tracer replay --device cuda`.

usage: python3 torch_replay.py TRACE.arrows [REPEATS]

With TORCH_REPLAY_BETWEEN set, that shell command runs after each timed
pass, so that another measurement (the model's benchmark) interleaves with
PyTorch's passes and both see the same phases of a shared host.

Only allocs and frees are replayed (free_requested frees the block), on the
current stream: the same request stream as replay.Requests/replay.Drive
(BenchmarkDriveCUDA). Prints one JSON line.
"""
import json
import os
import subprocess
import sys
import time

import pyarrow.ipc as ipc
import torch
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <chrono>
#include <vector>

// ops[i] >= 0: allocate sizes[i] bytes into slot ops[i]; ops[i] < 0: free slot -ops[i]-1.
double run(const std::vector<int64_t>& ops, const std::vector<int64_t>& sizes, int64_t slots) {
  std::vector<void*> ptr(slots, nullptr);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < ops.size(); i++) {
    int64_t op = ops[i];
    if (op >= 0) {
      ptr[op] = c10::cuda::CUDACachingAllocator::raw_alloc(sizes[i]);
    } else {
      void*& p = ptr[-op - 1];
      if (p) { c10::cuda::CUDACachingAllocator::raw_delete(p); p = nullptr; }
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  for (auto p : ptr) if (p) c10::cuda::CUDACachingAllocator::raw_delete(p);
  return std::chrono::duration<double>(t1 - t0).count();
}
"""

path = sys.argv[1]
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
t = ipc.open_stream(path).read_all()
cols = t.to_pydict()
ops, sizes, slot_of = [], [], {}
nslots = 0
for action, addr, size, recon in zip(cols["action"], cols["addr"], cols["size_bytes"], cols["reconstructed"]):
    if recon:
        continue  # state restored before a wrapped history: not a request
    if action == "alloc":
        slot_of[addr] = nslots
        ops.append(nslots)
        sizes.append(max(int(size), 1))
        nslots += 1
    elif action == "free_requested" and addr in slot_of:
        ops.append(-slot_of.pop(addr) - 1)
        sizes.append(0)
ext = load_inline("tracer_torch_replay", cpp_sources=CPP, functions=["run"], verbose=False,
                  extra_include_paths=[], with_cuda=True)
torch.cuda.init()
ext.run(ops, sizes, nslots)  # warm: the cache now holds the segments
between = os.environ.get("TORCH_REPLAY_BETWEEN")
passes = []
for _ in range(repeats):
    passes.append(ext.run(ops, sizes, nslots))
    if between:
        subprocess.run(between, shell=True, check=False)
best = min(passes)
print(json.dumps({"trace": path, "events": len(ops), "seconds": best, "passes": passes,
                  "ns_per_event": best / max(len(ops), 1) * 1e9,
                  "device": torch.cuda.get_device_name(0), "torch": torch.__version__}))
