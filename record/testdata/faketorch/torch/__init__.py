"""A stand-in for torch in record's tests (CI has no torch): just enough of
torch.cuda for tracer's startup hook. It logs the calls the hook makes to
$FAKE_TORCH_LOG and "dumps" by copying $FAKE_TORCH_SNAPSHOT."""
import os
import shutil
import types

__version__ = "0.0.0+fake"

_log_path = os.environ.get("FAKE_TORCH_LOG", "")


def _log(msg):
    if _log_path:
        with open(_log_path, "a") as f:
            f.write(msg + "\n")


class _C:
    observers = []

    @staticmethod
    def _cuda_attach_out_of_memory_observer(fn):
        _C.observers.append(fn)


cuda = types.ModuleType("torch.cuda")
memory = types.ModuleType("torch.cuda.memory")
cuda.memory = memory
_queued = []
_state = {"init": False}


def _is_available():
    return os.environ.get("FAKE_TORCH_CUDA", "1") == "1"


def _lazy_call(fn):
    if _state["init"]:
        fn()
    else:
        _queued.append(fn)


def _init():
    if _state["init"]:
        return
    if not _is_available():
        raise RuntimeError("no CUDA")
    _log("cuda init")
    _state["init"] = True
    for fn in _queued:
        fn()


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=0):
    _log("record_memory_history enabled=%s context=%s stacks=%s max_entries=%d init=%s"
         % (enabled, context, stacks, max_entries, _state["init"]))


def _dump_snapshot(path):
    _log("dump_snapshot")
    shutil.copyfile(os.environ["FAKE_TORCH_SNAPSHOT"], path)


def _oom():
    for fn in _C.observers:
        fn(0, 1 << 30, 1 << 34, 0)
    raise RuntimeError("CUDA out of memory (fake)")


cuda.is_available = _is_available
cuda.is_initialized = lambda: _state["init"]
cuda._lazy_call = _lazy_call
cuda.init = _init
cuda.fake_oom = _oom
memory._record_memory_history = _record_memory_history
memory._dump_snapshot = _dump_snapshot
