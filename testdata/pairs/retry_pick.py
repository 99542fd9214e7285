"""Keeps one retry run per program: python3 retry_pick.py OUTDIR PROGRAM.

make.sh runs each program under four limits (tags retry1..retry4, ever lower); the lowest
whose run made the allocator free its cache and retry (num_alloc_retries > 0) yet ended
without an OOM (on every device, every rank) makes the same requests as the default run and
becomes PROGRAM__retry. None such: no retry run, and the program says so.
"""
import glob
import json
import os
import sys

out, prog = sys.argv[1], sys.argv[2]
best = None
for k in (1, 2, 3, 4):
    stats = sorted(glob.glob(os.path.join(out, f"{prog}__retry{k}.*stats.json")) +
                   glob.glob(os.path.join(out, f"{prog}__retry{k}.stats.json")))
    if not stats:
        continue
    runs = [json.load(open(f)) for f in stats]
    ok = all(r["error"] is None and all(d["memory_stats"].get("num_ooms", 0) == 0 for d in r["devices"].values())
             for r in runs)
    retried = any(d["memory_stats"].get("num_alloc_retries", 0) > 0 for r in runs for d in r["devices"].values())
    if ok and retried:
        best = k
for k in (1, 2, 3, 4):
    for f in glob.glob(os.path.join(out, f"{prog}__retry{k}.*")):
        if k == best:
            os.replace(f, f.replace(f"__retry{k}.", "__retry."))
        else:
            os.remove(f)
print(prog, "retry:", f"limit {best} eighths down" if best else "no limit retried without an OOM")
