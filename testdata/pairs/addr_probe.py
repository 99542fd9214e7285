"""Where does the CUDA driver put device allocations? Evidence for SimDevice's address policy.

usage: python3 addr_probe.py OUT.json
       python3 addr_probe.py --replay SNAPSHOT.pickle   (one JSON line; one process per file)

Talks to the driver alone (libcuda through ctypes, no PyTorch), in a fresh primary context:
  - patterns: sequences of cuMemAlloc/cuMemFree (ascending sizes, holes of several sizes
    refilled by equal, smaller and larger requests, free-all and again) and
    cuMemAddressReserve, each address recorded;
  - --replay: for a snapshot without expandable segments, its device 0 segment_alloc
    and segment_free calls in order, comparing the address the driver returns with the one
    PyTorch's run got (exactly, and relative to the first segment).
"""
import ctypes
import json
import os
import pickle
import sys

cu = ctypes.CDLL("libcuda.so.1")
MiB = 1 << 20


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: CUresult {rc}")


check(cu.cuInit(0), "cuInit")
dev = ctypes.c_int()
check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p()
check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
total = ctypes.c_size_t()
check(cu.cuDeviceTotalMem_v2(ctypes.byref(total), dev), "cuDeviceTotalMem")


def alloc(size):
    p = ctypes.c_uint64()
    rc = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size))
    return p.value if rc == 0 else None


def free(p):
    check(cu.cuMemFree_v2(ctypes.c_uint64(p)), "cuMemFree")


def reserve(size, align=0):
    p = ctypes.c_uint64()
    check(cu.cuMemAddressReserve(ctypes.byref(p), ctypes.c_size_t(size), ctypes.c_size_t(align),
                                 ctypes.c_uint64(0), ctypes.c_ulonglong(0)), "cuMemAddressReserve")
    return p.value


def unreserve(p, size):
    check(cu.cuMemAddressFree(ctypes.c_uint64(p), ctypes.c_size_t(size)), "cuMemAddressFree")


log = []


def op(kind, size, addr):
    log.append(dict(op=kind, size=size, addr=addr))
    return addr


def pattern(name, steps):
    """Runs steps (a function of a recorder) and stores its log under name, then frees all."""
    global log
    log = []
    live = {}

    def a(tag, size):
        live[tag] = (op("alloc", size, alloc(size)), size)

    def f(tag):
        addr, size = live.pop(tag)
        free(addr)
        op("free", size, addr)

    steps(a, f)
    for tag in list(live):
        f(tag)
    return dict(name=name, log=log)


def ascending(a, f):
    for i, s in enumerate([2, 2, 2, 4, 6, 20, 20, 22, 40, 64, 100, 2, 2, 512, 2048, 2]):
        a(i, s * MiB)


def holes(a, f):
    for i in range(12):
        a(i, 20 * MiB)
    f(2), f(5), f(6), f(9)
    a("eq", 20 * MiB)      # an exact hole: the lowest? the last freed?
    a("small", 2 * MiB)    # a smaller request: into a hole or past the end?
    a("double", 40 * MiB)  # fits only the 5+6 double hole
    a("big", 60 * MiB)


def lifo(a, f):
    for i in range(6):
        a(i, (i + 1) * 2 * MiB)
    for i in reversed(range(6)):
        f(i)
    for i in range(6):
        a(("again", i), (i + 1) * 2 * MiB)


def mixed_large(a, f):
    a("g1", 1 << 30)
    a("m1", 100 * MiB)
    a("g2", 1 << 30)
    f("g1")
    a("m2", 100 * MiB)
    a("g3", 2 << 30)
    a("s", 2 * MiB)


def small_after_free(a, f):
    for i in range(8):
        a(i, 2 * MiB)
    for i in range(0, 8, 2):
        f(i)
    for i in range(4):
        a(("r", i), 2 * MiB)


def reserve_patterns():
    global log
    log = []
    # PyTorch reserves the whole device (rounded) per expandable segment.
    size = (total.value * 9 // 8 + (2 * MiB - 1)) // (2 * MiB) * (2 * MiB)
    r1 = op("reserve", size, reserve(size))
    m1 = op("alloc", 20 * MiB, alloc(20 * MiB))
    r2 = op("reserve", size, reserve(size))
    unreserve(r1, size)
    op("unreserve", size, r1)
    r3 = op("reserve", size, reserve(size))
    for p, s in ((r2, size), (r3, size)):
        unreserve(p, s)
        op("unreserve", s, p)
    free(m1)
    op("free", 20 * MiB, m1)
    return dict(name="reserve", log=log)


def replay_snapshot(path):
    snap = pickle.load(open(path, "rb"))
    traces = snap.get("device_traces") or []
    if not traces or not traces[0]:
        return dict(file=os.path.basename(path), skipped="no device 0 trace")
    evs = [e for e in traces[0] if e["action"] in ("segment_alloc", "segment_free", "segment_map", "segment_unmap")]
    if any(e["action"] in ("segment_map", "segment_unmap") for e in evs):
        return dict(file=os.path.basename(path), skipped="expandable segments")
    ours = {}
    exact = same_offset = n = 0
    base_rec = base_ours = None
    first_diff = None
    for e in evs:
        if e["action"] == "segment_alloc":
            p = alloc(e["size"])
            if p is None:
                return dict(file=os.path.basename(path), error=f"alloc of {e['size']} failed")
            n += 1
            if base_rec is None:
                base_rec, base_ours = e["addr"], p
            exact += p == e["addr"]
            ok = p - base_ours == e["addr"] - base_rec
            same_offset += ok
            if not ok and first_diff is None:
                first_diff = dict(index=n - 1, size=e["size"], recorded=e["addr"] - base_rec, driver=p - base_ours)
            ours[e["addr"]] = p
        elif e["addr"] in ours:
            free(ours.pop(e["addr"]))
    for p in ours.values():
        free(p)
    return dict(file=os.path.basename(path), segment_allocs=n, exact=exact, same_offset=same_offset,
                first_diff=first_diff)


if sys.argv[1] == "--replay":
    for path in sys.argv[2:]:
        print(json.dumps(replay_snapshot(path)), flush=True)
    sys.exit(0)
out = dict(total_memory=total.value, patterns=[])
for name, steps in (("ascending", ascending), ("holes", holes), ("lifo", lifo), ("mixed_large", mixed_large),
                    ("small_after_free", small_after_free)):
    out["patterns"].append(pattern(name, steps))
out["patterns"].append(reserve_patterns())
json.dump(out, open(sys.argv[1], "w"), indent=1)
