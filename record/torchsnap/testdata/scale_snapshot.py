#!/usr/bin/env python3
"""Scales a real snapshot up to about TARGET_MB by repeating its trace, for
timing (the result is not kept in the repository):

    python3 scale_snapshot.py IN.pickle OUT.pickle [TARGET_MB=10]

Each repetition is a fresh set of entry dicts (as PyTorch creates them) that
share the original frames lists (as PyTorch shares identical tracebacks), with
time_us shifted so the trace stays monotone. The segments (end state) are kept
as they are: the repetitions of a complete trace free what they allocate, so
the scaled file's history is as consistent as the original's only when the
original trace returns to its start state; it is meant for decode timing.
"""
import os, pickle, sys

src, dst = sys.argv[1], sys.argv[2]
target = float(sys.argv[3] if len(sys.argv) > 3 else 10) * 1e6
with open(src, "rb") as f:
    snap = pickle.load(f)
orig = snap["device_traces"][0]
span = orig[-1]["time_us"] - orig[0]["time_us"] + 1
reps = max(1, int(target / os.path.getsize(src)))
out = []
for r in range(reps):
    for e in orig:
        c = dict(e)
        c["time_us"] = e["time_us"] + r * span
        out.append(c)
snap["device_traces"][0] = out
with open(dst, "wb") as f:
    pickle.dump(snap, f)
print(dst, len(out), "entries", os.path.getsize(dst), "bytes")
