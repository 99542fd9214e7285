#!/usr/bin/env python3
"""Writes the seed corpus of FuzzDecode into fuzz/FuzzDecode/ (Go's
"go test fuzz v1" format): a tiny snapshot in pickle protocols 2, 4 and 5, its
JSON form, a bare segments list, and truncated copies."""
import json, os, pickle

frames = [{"filename": "a.py", "line": 1, "name": "f"}, {"filename": "b.py", "line": 2, "name": "<module>"}]
snap = {
    "segments": [{"device": 0, "address": 1 << 40, "total_size": 2097152, "allocated_size": 512,
                  "active_size": 512, "requested_size": 100, "stream": 0, "segment_type": "small",
                  "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
                  "blocks": [{"address": 1 << 40, "size": 512, "requested_size": 100, "state": "active_allocated", "frames": frames},
                             {"address": (1 << 40) + 512, "size": 2096640, "requested_size": 0, "state": "inactive", "frames": []}]}],
    "device_traces": [[
        {"action": "segment_alloc", "addr": 1 << 40, "size": 2097152, "stream": 0, "time_us": 1700000000000000, "frames": frames},
        {"action": "alloc", "addr": 1 << 40, "size": 100, "stream": 0, "time_us": 1700000000000001, "frames": frames},
        {"action": "alloc", "addr": (1 << 40) + 512, "size": 200, "stream": 0, "time_us": 1700000000000002, "frames": frames},
        {"action": "free_requested", "addr": (1 << 40) + 512, "size": 200, "stream": 0, "time_us": 1700000000000003},
        {"action": "free_completed", "addr": (1 << 40) + 512, "size": 200, "stream": 0, "time_us": 1700000000000004},
        {"action": "oom", "device_free": 12345, "size": 1 << 30, "stream": 0, "time_us": 1700000000000005},
    ]],
    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.5,
                           "expandable_segments": False, "roundup_power2_divisions": {"1": 0, "2": 4}},
    "external_annotations": [{"name": "step", "stage": "START", "device": 0, "time_us": 1}],
}

def jsonable(o):
    if isinstance(o, dict):
        return {k: jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    return o

seeds = {}
for p in (2, 4, 5):
    seeds["snap_p%d" % p] = pickle.dumps(snap, protocol=p)
seeds["snap_json"] = json.dumps(jsonable(snap)).encode()
seeds["segments_only"] = pickle.dumps(snap["segments"])
for k in list(seeds):
    seeds[k + "_trunc"] = seeds[k][: len(seeds[k]) // 2]

# Hostile and unusual inputs (issues 21.6, 22, 23.14, 23.15, 23.17, 23.19),
# small: a line number of 2^64-1, an alloc without addr, protocols 0 and 1,
# a trace list named twice, an entry named twice, a blocks list held by two
# segments, a frames list of 1,100 frames (two APPENDS batches), a trace
# without free_requested, and a run of DUP.
import copy
hostile = copy.deepcopy(snap)
hostile["device_traces"][0][1]["frames"] = [{"filename": "a.py", "line": 2**64 - 1, "name": "f"}] + frames
seeds["line_2p64"] = pickle.dumps(hostile, protocol=4)
noaddr = copy.deepcopy(snap)
del noaddr["device_traces"][0][2]["addr"]
seeds["alloc_no_addr"] = pickle.dumps(noaddr, protocol=4)
seeds["protocol0"] = pickle.dumps(snap, protocol=0)[:600]
seeds["protocol1"] = pickle.dumps(snap, protocol=1)[:600]
tr = snap["device_traces"][0]
seeds["shared_trace_list"] = pickle.dumps(dict(snap, device_traces=[tr, tr]), protocol=4)
seeds["shared_entry"] = pickle.dumps(dict(snap, device_traces=[[tr[0], tr[1], tr[1]]]), protocol=4)
seg = snap["segments"][0]
seeds["shared_blocks"] = pickle.dumps(dict(snap, segments=[seg, dict(seg, address=1 << 41)]), protocol=4)
fr = [{"filename": "m%d.py" % (i % 7), "line": i, "name": "f%d" % i} for i in range(50)]
deep = copy.deepcopy(snap)
for e in deep["device_traces"][0][:3]:
    e["frames"] = [fr[i % 50] for i in range(1100)]
seeds["deep_frames"] = pickle.dumps(deep, protocol=4)
seeds["skip_free_requested"] = pickle.dumps(dict(snap, device_traces=[[e for e in tr if e["action"] != "free_requested"]]), protocol=4)
seeds["dup_run"] = b"\x80\x04N" + b"2" * 2000 + b"."

def goquote(b):
    return '[]byte("' + "".join("\\x%02x" % c for c in b) + '")'

os.makedirs("fuzz/FuzzDecode", exist_ok=True)
for k, b in seeds.items():
    with open(os.path.join("fuzz/FuzzDecode", k), "w") as f:
        f.write("go test fuzz v1\n" + goquote(b) + "\n")
