"""(Not named timeit.py: scripts here go first on sys.path and would hide the
standard module that torch imports.) Run a command and print its wall time and peak RSS (of the command alone).

usage: python3 run_measured.py LABEL CMD ARGS...

Used where /usr/bin/time is missing (the GPU machine): one line,
"LABEL: 1.234 s wall, 307.2 MiB max RSS", on stderr; the command's own output
is discarded.
"""
import resource
import subprocess
import sys
import time

t0 = time.perf_counter()
rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL).returncode
wall = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
print("%s: %.3f s wall, %.1f MiB max RSS%s" % (sys.argv[1], wall, rss, "" if rc == 0 else ", exit %d" % rc),
      file=sys.stderr)
