#!/usr/bin/env python3
"""Regenerates the small test inputs in this folder from the real snapshots in
../../../testdata/snapshots. Run from this folder: python3 make_testdata.py

- oom_p{2,3,5}.pickle: oom__default__seed1 re-dumped with pickle protocols 2, 3, 5
- oom.json, attention.json: MemoryViz's JSON form (tuples become lists)
- segments_only.pickle: a bare segments list, as torch.cuda.memory_snapshot() returns
- multidevice.pickle: two devices (the second is a shifted copy of the first)
- legacy.pickle: ≈2.0-style blocks (history instead of frames/requested_size,
  no block addresses), no time_us, no allocator_settings
- unknown_action.pickle: a trace with annotation-like actions a reader must skip
"""
import copy, json, pickle

SRC = "../../../testdata/snapshots/"

def load(name):
    with open(SRC + name + ".pickle", "rb") as f:
        return pickle.load(f)

def dump(obj, name, protocol=4):
    with open(name, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)

oom = load("oom__default__seed1")
for p in (2, 3, 5):
    dump(oom, "oom_p%d.pickle" % p, p)

def jsonable(o):
    if isinstance(o, dict):
        return {k: jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    return o

with open("oom.json", "w") as f:
    json.dump(jsonable(oom), f)
att = load("attention_infer__default")
with open("attention.json", "w") as f:
    json.dump(jsonable(att), f, separators=(",", ":"))

dump(oom["segments"], "segments_only.pickle")

two = copy.deepcopy(att)
shift = 1 << 40
dev1 = copy.deepcopy(att["device_traces"][0][:200])
for e in dev1:
    if e["action"] != "oom":
        e["addr"] += shift
two["device_traces"].append(dev1)
for s in copy.deepcopy(att["segments"]):
    s["device"] = 1
    s["address"] += shift
    for b in s["blocks"]:
        b["address"] += shift
    two["segments"].append(s)
dump(two, "multidevice.pickle")

leg = copy.deepcopy(oom)
del leg["allocator_settings"], leg["external_annotations"]
for s in leg["segments"]:
    for b in s["blocks"]:
        b["history"] = [{"addr": b["address"], "real_size": b.pop("requested_size"), "frames": b.pop("frames")}]
        del b["address"]
for e in leg["device_traces"][0]:
    del e["time_us"]
dump(leg, "legacy.pickle", 2)

unk = copy.deepcopy(oom)
t = unk["device_traces"][0]
t.insert(3, {"action": "user_annotation", "addr": 0, "size": 0, "stream": 0, "time_us": 1})
t.insert(7, {"action": "user_annotation", "addr": 0, "size": 0, "stream": 0, "time_us": 2})
dump(unk, "unknown_action.pickle")

# shared_frames.pickle: trace entries' frames lists that the pickle refers to
# again after the trace, as values a reader converts (allocator_settings),
# and from segment blocks written after the trace: the decoder drops a frames
# list's items once it has made its stack, and must rebuild them.
sh = load("oom__default__seed1")
entries = [e for e in sh["device_traces"][0] if e.get("frames")]
shared = [e["frames"] for e in entries[:5]]
sh = {"device_traces": sh["device_traces"], "segments": sh["segments"],
      "allocator_settings": dict(sh.get("allocator_settings", {}), x_frames=shared)}
for seg in sh["segments"]:
    for blk in seg["blocks"]:
        if blk.get("frames") is not None and shared:
            blk["frames"] = shared[0]
dump(sh, "shared_frames.pickle")
