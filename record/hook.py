# tracer's startup hook for `tracer record -- python ...`.
#
# tracer writes this file as sitecustomize.py into a private temporary folder
# and puts that folder first on PYTHONPATH, so Python's site module imports it
# before the program runs. It must cost nothing for programs that never use
# CUDA, and never break the program: every failure is reported in the status
# file and swallowed.
#
#  1. It chains to the sitecustomize this one hides, if any.
#  2. It waits for `import torch` (a meta-path hook; importing torch here would
#     slow every program and initialize things in the wrong order), then asks
#     torch to run `enable` right after CUDA's lazy initialization, which
#     comes before the first CUDA allocation: memory history on
#     (torch.cuda.memory._record_memory_history) and the OOM observer attached.
#  3. It dumps the snapshot (torch.cuda.memory._dump_snapshot) when the
#     program ends: at exit, on an uncaught exception, on a CUDA OOM, and on
#     SIGTERM/SIGINT (which tracer forwards), then lets the signal take its
#     course. A later dump replaces an earlier one: it holds more history.
#
# Environment (set by tracer):
#   TRACER_HOOK_DIR          where snapshots go: snapshot-<pid>.pickle
#   TRACER_HOOK_STATUS       status file: lines "<pid> <word> [detail]"
#   TRACER_HOOK_MAX_ENTRIES  history ring-buffer size
#   TRACER_HOOK_STACKS       python | all | none
#
# Status words: started <python>, no-torch <python>, torch <version>,
# recording <settings>, dumped <path> <reason>, no-cuda (torch imported, no
# GPU), cuda-unused (torch imported, CUDA never initialized), error <message>.
#
# Every process that imports torch records itself (DataLoader workers that
# never touch CUDA dump nothing; each torchrun rank dumps its own file).

import os
import sys

_DIR = os.environ.get("TRACER_HOOK_DIR", "")
_STATUS = os.environ.get("TRACER_HOOK_STATUS", "")
_state = {"enabled": False, "dumping": False, "why": ""}


def _status(word, detail=""):
    if not _STATUS:
        return
    try:
        line = "%d %s %s" % (os.getpid(), word, " ".join(str(detail).split()))
        fd = os.open(_STATUS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line.rstrip() + "\n").encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:
        pass


def _chain():
    """Run the sitecustomize this file hides, as Python would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)


def _dump(reason):
    if not _state["enabled"] or _state["dumping"]:
        return
    # The first abnormal cause (an OOM, then the exception it raised) names
    # every later dump, which only adds the teardown to the history.
    if reason == "exit":
        reason = _state["why"] or reason
    elif not _state["why"]:
        _state["why"] = reason
    torch = sys.modules.get("torch")
    if torch is None:
        return
    _state["dumping"] = True
    try:
        if not torch.cuda.is_initialized():
            return
        path = os.path.join(_DIR, "snapshot-%d.pickle" % os.getpid())
        tmp = path + ".tmp"
        torch.cuda.memory._dump_snapshot(tmp)
        os.replace(tmp, path)
        _status("dumped", path + " " + reason)
    except Exception as e:
        _status("error", "dump (%s): %s: %s" % (reason, type(e).__name__, e))
    finally:
        _state["dumping"] = False


def _enable():
    torch = sys.modules["torch"]
    try:
        stacks = os.environ.get("TRACER_HOOK_STACKS", "python")
        max_entries = int(os.environ.get("TRACER_HOOK_MAX_ENTRIES", "1000000"))
        context = None if stacks == "none" else "all"
        torch.cuda.memory._record_memory_history(
            enabled="all", context=context, stacks="python" if stacks == "none" else stacks,
            max_entries=max_entries)
        _state["enabled"] = True
        _status("recording", "max_entries=%d stacks=%s" % (max_entries, stacks))
    except Exception as e:
        _status("error", "record_memory_history: %s: %s" % (type(e).__name__, e))
        return
    try:
        torch._C._cuda_attach_out_of_memory_observer(
            lambda device, alloc, device_alloc, device_free: _dump("oom"))
    except Exception as e:
        _status("error", "attach_out_of_memory_observer: %s: %s" % (type(e).__name__, e))


def _torch_imported(torch):
    _status("torch", getattr(torch, "__version__", "?"))
    try:
        # Run enable right after CUDA's lazy initialization (or now, if it
        # already happened): before the first allocation, and without forcing
        # CUDA up early, which would break a program that forks workers or
        # sets CUDA_VISIBLE_DEVICES after importing torch. (Even
        # torch.cuda.is_available() is left for the end, for the same
        # reason.)
        lazy = getattr(torch.cuda, "_lazy_call", None)
        if lazy is None or torch.cuda.is_initialized():
            _enable()
        else:
            lazy(_enable)
    except Exception as e:
        _status("error", "torch setup: %s: %s" % (type(e).__name__, e))


def _at_exit():
    if _state["enabled"]:
        _dump("exit")
        return
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if not torch.cuda.is_available():
            _status("no-cuda")
        else:
            _status("cuda-unused")
    except Exception as e:
        _status("error", "is_available: %s: %s" % (type(e).__name__, e))


class _TorchWatcher:
    """A meta-path finder that sees `import torch` through, then calls
    _torch_imported once the module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


class _Loader:
    """Wraps torch's loader; everything but exec_module goes to it."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        # Put the real loader back first: tools that inspect the module see
        # the one they expect.
        module.__loader__ = self._inner
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._inner
        self._inner.exec_module(module)
        _torch_imported(module)


def _on_signal(signum, frame):
    import signal

    # Ignore repeats while dumping (a terminal's Ctrl-C reaches the program
    # and tracer both; tracer forwards its copy).
    old = signal.signal(signum, signal.SIG_IGN)
    _dump(signal.Signals(signum).name.lower())
    prev = _prev_handlers.get(signum)
    if callable(prev):
        signal.signal(signum, prev)
        prev(signum, frame)
    elif prev == signal.SIG_IGN:
        signal.signal(signum, old)
    else:
        # Die of the signal, as without the hook.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_prev_handlers = {}


def _install():
    import atexit
    import importlib.util
    import signal
    import threading

    _status("started", sys.executable)
    if importlib.util.find_spec("torch") is None:
        _status("no-torch", sys.executable)
        return
    if "torch" in sys.modules:  # imported by a chained sitecustomize
        _torch_imported(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchWatcher())
    atexit.register(_at_exit)

    prev_hook = sys.excepthook

    def excepthook(tp, value, tb):
        _dump("exception")
        prev_hook(tp, value, tb)

    sys.excepthook = excepthook
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            _prev_handlers[sig] = signal.getsignal(sig)
            signal.signal(sig, _on_signal)


try:
    _chain()
finally:
    if _STATUS:
        try:
            _install()
        except Exception as e:
            _status("error", "install: %s: %s" % (type(e).__name__, e))
