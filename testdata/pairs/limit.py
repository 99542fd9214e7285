"""The limit make.sh gives a setting: python3 limit.py STATS.json gc|retryK, printed in bytes.

gc: the default run's reserved peak / 0.75, so that garbage_collection_threshold:0.6 fires
near the peak; retryK (K = 1..4): K eighths of the way down from its reserved peak to its
allocated peak, so that a malloc must free cached blocks and retry (make.sh keeps the lowest
that ended without an OOM); retryfineK (RETRY_FINE=1 make.sh): K times 2 MiB below it. Rounded up to 2 MiB. Of several devices, the one that reserved most.
"""
import json
import sys

devices = json.load(open(sys.argv[1]))["devices"]
s = max(devices.values(), key=lambda v: v["memory_stats"]["reserved_bytes.all.peak"])["memory_stats"]
r, a = s["reserved_bytes.all.peak"], s["allocated_bytes.all.peak"]
kind = sys.argv[2]
if kind == "gc":
    limit = int(r / 0.75)
elif kind.startswith("retryfine"):  # K small segments (2 MiB) below the reserved peak
    limit = r - int(kind.removeprefix("retryfine")) * (2 << 20)
else:
    limit = r - int(kind.removeprefix("retry")) * (r - a) // 8
mib2 = 2 << 20
print(-(-limit // mib2) * mib2)
