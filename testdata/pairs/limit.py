"""The limit make.sh gives a setting: python3 limit.py STATS.json gc|retry, printed in bytes.

gc: the default run's reserved peak / 0.75, so that garbage_collection_threshold:0.6 fires
near the peak; retry: halfway between its allocated and reserved peaks, so that a malloc must
free cached blocks and retry. Rounded up to 2 MiB. Of several devices, the one that reserved most.
"""
import json
import sys

devices = json.load(open(sys.argv[1]))["devices"]
s = max(devices.values(), key=lambda v: v["memory_stats"]["reserved_bytes.all.peak"])["memory_stats"]
r, a = s["reserved_bytes.all.peak"], s["allocated_bytes.all.peak"]
limit = int(r / 0.75) if sys.argv[2] == "gc" else a + (r - a) // 2
mib2 = 2 << 20
print(-(-limit // mib2) * mib2)
