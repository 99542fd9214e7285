#!/usr/bin/env python3
"""tracer import against pickle.load, round by round (issue 22's import target).

    python3 testdata/bench/import_ratio.py [--bench RECORD_TEST] TRACER ROUNDS SNAPSHOT.pickle...

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

Each round also runs `TRACER version` the same way: its peak RSS is the
process's own start-up (the executable's pages, the runtime, every
package's init), which any command pays whatever its input. The import's
peak above it is what the import itself holds.

Prints a line per snapshot: the least import and least pickle.load
(seconds), their ratio, the median of the rounds' own ratios, the import's
median and highest peak RSS (MiB), the file's size (bytes) and the median
peak RSS of `TRACER version` (MiB):

    NAME least_import_s least_pickle_s least_ratio median_round_ratio peak_median_mib peak_max_mib bytes start_peak_mib

With --bench (a test binary of the record package, `go test -c -o
record.test ./record`), each round also times the import in a process's
own time, as pickle.load is timed: BenchmarkImport of the file (5
imports after one, run from record/ beside testdata/), and pickle.load
as a whole Python process (`python3 -c`, exec to exit, through maxrss.c
as the import process is). The line then goes on with the least benchmark
import and its ratio to the least pickle.load, the least whole Python
process and the whole import's ratio to it, and that process's median peak
RSS (MiB):

    ... bench_import_s bench_ratio python_process_s process_ratio python_peak_mib
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


def measured(maxrss, *argv):
    """One process through maxrss.c: (wall seconds, peak RSS MiB, exit status)."""
    line = subprocess.run([maxrss, *argv], capture_output=True, text=True).stdout.split()
    # "0.0421 s 14.37 MiB rc=0"
    return float(line[0]), float(line[2]), int(line[4].removeprefix("rc="))


def run_import(maxrss, tracer, path, out):
    """One import process to a free path: (wall seconds, peak RSS MiB, exit status)."""
    try:
        os.unlink(out)
    except FileNotFoundError:
        pass
    return measured(maxrss, tracer, "import", path, "-o", out)


def run_bench(record_test, path):
    """BenchmarkImport of path in record_test's process: seconds an import."""
    name = os.path.splitext(os.path.basename(path))[0]
    cwd = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "record")
    r = subprocess.run([record_test, "-test.run", "^$", "-test.bench", f"BenchmarkImport$/^{name}$",
                        "-test.benchtime", "5x"], cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, "TRACER_IMPORT_BENCH": os.path.abspath(path)})
    for line in r.stdout.splitlines():
        f = line.split()
        if f and f[0].startswith("BenchmarkImport/") and "ns/op" in f:
            return float(f[f.index("ns/op") - 1]) / 1e9
    sys.exit(f"import_ratio: no BenchmarkImport line for {path}:\n{r.stdout}{r.stderr}")


def python_process(maxrss, path):
    """pickle.load as a whole Python process, exec to exit: (seconds, peak RSS MiB)."""
    wall, peak, code = measured(maxrss, sys.executable, "-c",
                                "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))", path)
    if code != 0:
        sys.exit(f"import_ratio: python3 could not load {path} (exit {code})")
    return wall, peak


def load(path):
    gc.collect()
    with open(path, "rb") as f:
        t = time.perf_counter()
        pickle.load(f)
        return time.perf_counter() - t


def main():
    args = sys.argv[1:]
    record_test = None
    if args[:1] == ["--bench"] and len(args) > 1:
        record_test, args = os.path.abspath(args[1]), args[2:]
    if len(args) < 3:
        sys.exit(__doc__.strip().split("\n\n")[1])
    tracer, rounds, paths = os.path.abspath(args[0]), int(args[1]), args[2:]
    with tempfile.TemporaryDirectory() as work:
        maxrss = build_maxrss(work)
        out = os.path.join(work, "out.trace")
        for path in paths:
            name = os.path.splitext(os.path.basename(path))[0]
            if run_import(maxrss, tracer, path, out)[2] != 0:
                print(f"{name} import failed", flush=True)
                continue
            imports, loads, peaks, starts, benches, pythons, python_peaks = [], [], [], [], [], [], []
            for _ in range(rounds):
                wall, peak, code = run_import(maxrss, tracer, path, out)
                if code != 0:
                    break
                imports.append(wall)
                peaks.append(peak)
                starts.append(measured(maxrss, tracer, "version")[1])
                loads.append(load(path))
                if record_test:
                    benches.append(run_bench(record_test, path))
                    wall, peak = python_process(maxrss, path)
                    pythons.append(wall)
                    python_peaks.append(peak)
            if not imports:
                print(f"{name} import failed", flush=True)
                continue
            ratios = [i / p for i, p in zip(imports, loads)]
            line = (f"{name} {min(imports):.4f} {min(loads):.4f} {min(imports) / min(loads):.3f} "
                    f"{statistics.median(ratios):.3f} {statistics.median(peaks):.2f} {max(peaks):.2f} "
                    f"{os.path.getsize(path)} {statistics.median(starts):.2f}")
            if benches:
                line += (f" {min(benches):.5f} {min(benches) / min(loads):.3f}"
                         f" {min(pythons):.4f} {min(imports) / min(pythons):.3f}"
                         f" {statistics.median(python_peaks):.2f}")
            print(line, flush=True)


if __name__ == "__main__":
    main()
