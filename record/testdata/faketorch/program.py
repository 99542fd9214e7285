"""A program for record's hook tests, run with the fake torch on PYTHONPATH.
argv[1]: exit | exception | oom | sigterm | nocuda | notorch."""
import os
import signal
import sys
import time

mode = sys.argv[1]
print("program", mode, flush=True)
if mode == "notorch":
    sys.exit(0)
import torch  # noqa: E402

if mode == "nocuda":
    sys.exit(0)
torch.cuda.init()
if mode == "exception":
    raise ValueError("boom")
if mode == "oom":
    try:
        torch.cuda.fake_oom()
    except RuntimeError:
        pass
    os._exit(3)  # no atexit: only the OOM dump remains
if mode == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
sys.exit(int(os.environ.get("PROGRAM_EXIT", "0")))
