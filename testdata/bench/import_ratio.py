#!/usr/bin/env python3
"""tracer import against pickle.load, round by round (issue 22's import target).

    python3 testdata/bench/import_ratio.py TRACER ROUNDS SNAPSHOT.pickle...

For each snapshot, each round runs one `TRACER import` process (its wall
time and peak RSS as testdata/bench/maxrss.c reports them: a child Python
spawns starts in Python's memory, which Linux carries into its peak) and
then one
pickle.load of the same file in this process (its own time, without
Python's start; the collector run before it), so that both sample the host
at the same moments: a host whose speed drifts during a run (the GPU
machines' moves by up to 2x within a minute) then moves both, where timing
all imports before all loads compares two different hosts. One import
outside the measure warms the page cache.

Prints a line per snapshot: the least import and least pickle.load
(seconds), their ratio, the median of the rounds' own ratios, the import's
median and highest peak RSS (MiB) and the file's size (bytes):

    NAME least_import_s least_pickle_s least_ratio median_round_ratio peak_median_mib peak_max_mib bytes
"""
import gc
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time


def build_maxrss(work):
    """Compiles maxrss.c (beside this file) into work; its path."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "maxrss.c")
    exe = os.path.join(work, "maxrss")
    for flags in (["-static"], []):
        if subprocess.run(["cc", "-O2", *flags, "-o", exe, src], capture_output=True).returncode == 0:
            return exe
    sys.exit("import_ratio: cannot build testdata/bench/maxrss.c (no C compiler?)")


def run_import(maxrss, tracer, path, out):
    """One import process: (wall seconds, peak RSS MiB, exit status)."""
    try:
        os.unlink(out)
    except FileNotFoundError:
        pass
    line = subprocess.run([maxrss, tracer, "import", path, "-o", out], capture_output=True, text=True).stdout.split()
    # "0.0421 s 14.37 MiB rc=0"
    return float(line[0]), float(line[2]), int(line[4].removeprefix("rc="))


def load(path):
    gc.collect()
    with open(path, "rb") as f:
        t = time.perf_counter()
        pickle.load(f)
        return time.perf_counter() - t


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().split("\n\n")[1])
    tracer, rounds, paths = os.path.abspath(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    with tempfile.TemporaryDirectory() as work:
        maxrss = build_maxrss(work)
        out = os.path.join(work, "out.trace")
        for path in paths:
            name = os.path.splitext(os.path.basename(path))[0]
            if run_import(maxrss, tracer, path, out)[2] != 0:
                print(f"{name} import failed", flush=True)
                continue
            imports, loads, peaks = [], [], []
            for _ in range(rounds):
                wall, peak, code = run_import(maxrss, tracer, path, out)
                if code != 0:
                    break
                imports.append(wall)
                peaks.append(peak)
                loads.append(load(path))
            if not imports:
                print(f"{name} import failed", flush=True)
                continue
            ratios = [i / p for i, p in zip(imports, loads)]
            print(f"{name} {min(imports):.4f} {min(loads):.4f} {min(imports) / min(loads):.3f} "
                  f"{statistics.median(ratios):.3f} {statistics.median(peaks):.2f} {max(peaks):.2f} "
                  f"{os.path.getsize(path)}", flush=True)


if __name__ == "__main__":
    main()
