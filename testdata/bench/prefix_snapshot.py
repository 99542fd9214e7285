"""A mid-size snapshot from a complete one (testdata/bench/scale_snapshots.py
small, recorded from an empty allocator): its first K trace entries, with the
segments the prefix allocated, their live blocks (allocs not freed) and
inactive blocks in the gaps, as PyTorch shows a small-pool segment. No torch
needed. usage: python3 prefix_snapshot.py IN.pickle OUT.pickle K"""
import bisect
import pickle
import sys

inp, out, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(inp, 'rb') as f:
    s = pickle.load(f)
tr = s['device_traces'][0]
while k < len(tr) and tr[k]['action'] == 'free_completed':
    k += 1
pre = tr[:k]
segs, live = {}, {}
for e in pre:
    a = e['action']
    if a == 'segment_alloc':
        segs[e['addr']] = e
    elif a == 'alloc':
        live[e['addr']] = e
    elif a == 'free_completed':
        live.pop(e['addr'], None)
    elif a == 'segment_free':
        segs.pop(e['addr'], None)
rnd = lambda n: max(512, (n + 511) // 512 * 512)
bounds = sorted(segs)
out_segs = []
by_seg = {a: [] for a in bounds}
for addr, e in live.items():
    i = bisect.bisect_right(bounds, addr) - 1
    by_seg[bounds[i]].append(e)
for a in bounds:
    sg = segs[a]
    blocks, pos, alloc, req = [], a, 0, 0
    for e in sorted(by_seg[a], key=lambda e: e['addr']):
        if e['addr'] > pos:
            blocks.append({'address': pos, 'size': e['addr'] - pos, 'requested_size': 0, 'state': 'inactive', 'frames': []})
        size = rnd(e['size'])
        blocks.append({'address': e['addr'], 'size': size, 'requested_size': e['size'], 'state': 'active_allocated', 'frames': e['frames']})
        alloc += size
        req += e['size']
        pos = e['addr'] + size
    end = a + sg['size']
    if end > pos:
        blocks.append({'address': pos, 'size': end - pos, 'requested_size': 0, 'state': 'inactive', 'frames': []})
    out_segs.append({'device': 0, 'address': a, 'total_size': sg['size'], 'allocated_size': alloc, 'active_size': alloc,
                     'requested_size': req, 'stream': sg['stream'], 'segment_type': 'small', 'segment_pool_id': (0, 0),
                     'is_expandable': False, 'frames': [], 'blocks': blocks})
s['segments'] = out_segs
s['device_traces'] = [pre]
with open(out, 'wb') as f:
    pickle.dump(s, f)
