"""A seed-shaped snapshot made without a GPU, for the import's figures at
the seed's full scale where scale_snapshots.py (which needs the GPU)
cannot run:

    python3 seed_pickle.py N OUT.pickle

N tensors of 129 floats (516 bytes requested, 1 KiB blocks, 2,048 to a
2 MiB small segment, a gap after every 20 segments), every other one
freed in order (free_requested, free_completed), then one large request,
with the final state that leaves: the entries, keys and settings of
seed1m.pickle, pickle protocol 4, no stacks. N = 4,000,000 gives the GPU
host's seed (8,001,956 entries, 688 MB; 5 GB of memory and about two
minutes to write); N = 1,000,000 one like /work/big/seed1m.pickle."""
import pickle
import sys

n, out = int(sys.argv[1]), sys.argv[2]
MiB = 1 << 20
base = 0x7F30_F5E0_0000
big_size = 74266443776
big_addr = base - 8 * (1 << 30) - big_size
cc, um = "N/A", ""


def ev(action, addr, size, t):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "compile_context": cc, "user_metadata": um}


t = 1795777753665158
trace, segs, addrs = [], [], []
for i in range(n):
    if i % 2048 == 0:
        k = i // 2048
        seg = base + k * 2 * MiB + (k // 20) * 64 * MiB
        segs.append(seg)
        trace.append(ev("segment_alloc", seg, 2 * MiB, t))
        t += 1
    addrs.append(seg + (i % 2048) * 1024)
    trace.append(ev("alloc", addrs[-1], 516, t))
    t += 4
for i in range(1, n, 2):
    trace.append(ev("free_requested", addrs[i], 516, t))
    t += 1
    trace.append(ev("free_completed", addrs[i], 516, t))
trace.append(ev("segment_alloc", big_addr, big_size, t))
trace.append(ev("alloc", big_addr, big_size - 458752, t + 3))


def segment(addr, size, small, blocks):
    alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    req = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    return {"device": 0, "address": addr, "total_size": size, "allocated_size": alloc, "active_size": alloc,
            "requested_size": req, "stream": 0, "segment_type": "small" if small else "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}


segments = [segment(big_addr, big_size, False, [{"address": big_addr, "size": big_size, "requested_size": big_size - 458752,
                                                "state": "active_allocated", "frames": []}])]
for j, s in enumerate(segs):
    cnt = min(2048, n - j * 2048)
    blocks = [{"address": s + b * 1024, "size": 1024, "requested_size": 516,
               "state": "active_allocated" if (j * 2048 + b) % 2 == 0 else "inactive", "frames": []} for b in range(cnt)]
    if cnt < 2048:
        blocks.append({"address": s + cnt * 1024, "size": 2 * MiB - cnt * 1024, "requested_size": 0, "state": "inactive", "frames": []})
    segments.append(segment(s, 2 * MiB, True, blocks))
settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": False, "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False, "graph_capture_record_stream_reuse": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}
with open(out, "wb") as f:
    pickle.dump({"segments": segments, "device_traces": [trace], "allocator_settings": settings,
                 "external_annotations": []}, f, protocol=4)
print(f"{out}: {n} tensors, {len(trace)} entries")
